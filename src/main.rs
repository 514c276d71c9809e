fn main() {
    // Self-helper mode: `cordon __sandbox ARGS...` is `cordon-sandbox ARGS...`, so the parent
    // side needs no separately installed helper.
    let mut args = std::env::args_os();
    let _ = args.next();
    if args.next().as_deref() == Some(std::ffi::OsStr::new(cordon::helper::SELF_HELPER_ARG)) {
        std::process::exit(cordon_sandbox::main_with_args(args));
    }
}
