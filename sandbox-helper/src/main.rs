//! `cordon-sandbox (--policy JSON | --policy-file PATH) [--cwd DIR] [--status-fd N] -- PROGRAM [ARGS...]`

fn main() {
    std::process::exit(cordon_sandbox::main_with_args(std::env::args_os().skip(1)));
}
