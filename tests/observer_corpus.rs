//! A labelled corpus of real tools run live under the seccomp observer: compilers, archivers,
//! databases, key tools, build tools, interpreters, a static binary, a daemon over a unix
//! socket and TCP port rules, each attempting something the profile refuses (or, in the
//! harmless cases, failing for a reason of its own). The observer's denials must be exactly
//! the labels: precision and recall 1.0, with the exact target. The same cases run again in
//! the default scope (network calls and directory creations from the kernel, other file
//! denials from the text), against what the text can show (`Case::by_text`: silent runs are
//! missed, a replayed log believed).
//!
//! Labels were written from what each tool does (the file it creates, the socket it reaches),
//! not from what the observer said; `@OUT@` is a directory outside every writable root.

mod common;

use std::collections::BTreeSet;
use std::os::unix::net::UnixListener;

use common::Tree;

struct Case {
    name: &'static str,
    script: String,
    /// Extra `cordon run` arguments (before `--`).
    flags: Vec<String>,
    /// (operation, target) with `@OUT@` for the outside directory.
    expected: Vec<(&'static str, String)>,
    /// What the default scope finds where it differs: file denials there come from the text,
    /// which a silent tool does not give and a replayed log can forge.
    by_text: Option<Vec<(&'static str, String)>>,
    /// The refused calls are ones the default scope watches too (directory creations, a check
    /// for write access): its denials are the kernel's there, and `by_text` does not apply.
    watched_by_default: bool,
}

impl Case {
    fn watched_by_default(mut self) -> Case {
        self.watched_by_default = true;
        self
    }

    fn by_text(mut self, found: &[(&'static str, &str)]) -> Case {
        self.by_text = Some(found.iter().map(|(o, t)| (*o, (*t).to_owned())).collect());
        self
    }
}

fn case(name: &'static str, script: &str, expected: &[(&'static str, &str)]) -> Case {
    Case {
        name,
        script: script.to_owned(),
        flags: Vec::new(),
        expected: expected
            .iter()
            .map(|(o, t)| (*o, (*t).to_owned()))
            .collect(),
        by_text: None,
        watched_by_default: false,
    }
}

fn has(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn real_tools_under_the_observer_precision_and_recall_are_one() {
    let tree = Tree::new();
    let out = tree.outside.display().to_string();
    std::fs::write(tree.outside.join("data.txt"), "data\n").unwrap();
    std::fs::write(tree.cwd.join("m.c"), "int main(void) { return 0; }\n").unwrap();
    std::fs::write(
        tree.cwd.join("Makefile"),
        format!("all:\n\techo made > {out}/made\n"),
    )
    .unwrap();
    std::fs::write(
        tree.cwd.join("log.txt"),
        format!("touch: cannot touch '{out}/replayed': Permission denied\nbash: /etc/passwd: Permission denied\n"),
    )
    .unwrap();
    let static_probe = common::compile_c(
        &tree.root,
        "static-probe",
        &format!(
            "#include <fcntl.h>\nint main(void) {{ return open(\"{out}/static\", O_WRONLY | O_CREAT, 0644) < 0 ? 1 : 0; }}\n"
        ),
    );
    // Linked statically: no libc of the host, no message, only the exit status.
    let static_bin = tree.root.join("static-bin");
    let linked = std::process::Command::new("gcc")
        .args(["-static", "-O0", "-o"])
        .arg(&static_bin)
        .arg(tree.root.join("static-probe.c"))
        .status()
        .is_ok_and(|s| s.success());
    let _ = static_probe;

    let daemon_path = tree.outside.join("daemon.sock");
    let daemon = UnixListener::bind(&daemon_path).unwrap();
    daemon.set_nonblocking(true).unwrap();
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = tcp.local_addr().unwrap().port();
    let ports_profile = tree.root.join("ports.toml");
    std::fs::write(
        &ports_profile,
        "extends = \"workspace-write\"\n[network]\nmode = \"enabled\"\ntcp_connect = [1]\n",
    )
    .unwrap();
    let py = common::python().display().to_string();
    std::fs::write(
        tree.cwd.join("Hello.java"),
        format!("public class Hello {{ public static void main(String[] a) throws Exception {{ new java.io.FileWriter(\"{out}/j.txt\").close(); }} }}\n"),
    )
    .unwrap();
    std::fs::write(tree.cwd.join("r.rs"), "fn main() {}\n").unwrap();

    let mut cases = vec![
        case("gcc output outside", &format!("gcc m.c -o {out}/m"), &[("file_write", "@OUT@/m")]),
        case("gcc output inside", "gcc m.c -o m && ./m", &[]),
        case("tar extract outside", &format!("tar cf a.tar m.c && tar xf a.tar -C {out}"), &[("file_write", "@OUT@/m.c")]),
        case("tar list", "tar cf a.tar m.c && tar tf a.tar >/dev/null", &[]),
        case("gzip beside an outside file", &format!("gzip -k {out}/data.txt"), &[("file_write", "@OUT@/data.txt.gz")]),
        case("gzip to stdout", &format!("gzip -c {out}/data.txt > d.gz"), &[]),
        case("sqlite3 database outside", &format!("sqlite3 {out}/db.sqlite 'create table t(x)'"), &[("file_write", "@OUT@/db.sqlite")]),
        case("sqlite3 database inside", "sqlite3 db.sqlite 'create table t(x)'", &[]),
        case("openssl key outside", &format!("openssl genrsa -out {out}/key.pem 1024"), &[("file_write", "@OUT@/key.pem")]),
        case("ssh-keygen key outside", &format!("ssh-keygen -q -N '' -t ed25519 -f {out}/id"), &[("file_write", "@OUT@/id")]),
        case("git init outside", &format!("git init -q {out}/repo"), &[("file_write", "@OUT@/repo")]).watched_by_default(),
        case("make recipe writes outside", "make -s", &[("file_write", "@OUT@/made")]),
        case("perl open for writing", &format!("perl -e 'open(F, \">\", \"{out}/p\") or exit 2'"), &[("file_write", "@OUT@/p")]).by_text(&[]),
        case("perl reads outside (allowed)", &format!("perl -ne 'print' {out}/data.txt >/dev/null && exit 4"), &[]),
        case("silent shell", &format!("{{ echo > {out}/silent; }} 2>/dev/null; exit 3"), &[("file_write", "@OUT@/silent")]).by_text(&[]),
        case("killed by a signal after the attempt", &format!("touch {out}/t 2>/dev/null; kill -9 $$"), &[("file_write", "@OUT@/t")]).by_text(&[]),
        case("missing file is no denial", "ls /nonexistent-path", &[]),
        case("mkdir -p of existing dirs", "mkdir -p /usr/lib && exit 1", &[]),
        case("no such socket is no denial", &format!("{py} -c \"import socket; socket.socket(socket.AF_UNIX).connect('{out}/none.sock')\""), &[]),
        case("replayed log is no denial", "cat log.txt >&2; exit 1", &[]).by_text(&[("file_write", "@OUT@/replayed"), ("file_write", "/etc/passwd")]),
        case("daemon over a unix socket", &format!("{py} -c \"import socket; socket.socket(socket.AF_UNIX).connect('{out}/daemon.sock')\""), &[("unix_socket", "@OUT@/daemon.sock")]),
        // The JVM: the compiler's class file, and a program that writes (single-file launch).
        case("javac class outside", &format!("javac -d {out} Hello.java"), &[("file_write", "@OUT@/Hello.class")]),
        case("java program writes outside", "java Hello.java", &[("file_write", "@OUT@/j.txt")]),
        case("javac class inside", "javac -d classes Hello.java", &[]),
        // Rust toolchain and a package manager's project and environment creation.
        case("rustc output inside", "rustc -o r r.rs && ./r", &[]),
        case("cargo new outside", &format!("cargo new -q --vcs none {out}/newcrate"), &[("file_write", "@OUT@/newcrate")]).watched_by_default(),
        case("python venv outside", &format!("{py} -m venv --without-pip {out}/venv"), &[("file_write", "@OUT@/venv")]).watched_by_default(),
        // Refused at socket(), before any address: the kernel has no target, and the
        // command's own words (its argv here) supply it.
        case("python network", &format!("{py} -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\""), &[("network", &format!("127.0.0.1:{port}"))]),
    ];
    let mut allowed_socket = case(
        "daemon reached when allowed",
        &format!("{py} -c \"import socket; socket.socket(socket.AF_UNIX).connect('{out}/daemon.sock')\"; exit 1"),
        &[],
    );
    allowed_socket.flags = vec!["--allow-unix-sockets".into()];
    cases.push(allowed_socket);
    if common::landlock_abi().is_some_and(|abi| abi >= 4) {
        let mut ports = case(
            "TCP port outside the list",
            &format!("{py} -c \"import socket; socket.create_connection(('127.0.0.1', {port}))\""),
            &[],
        );
        ports.flags = vec!["-p".into(), ports_profile.display().to_string()];
        ports.expected = vec![("tcp_port", format!("127.0.0.1:{port}"))];
        cases.push(ports);
    }
    // A tool that checks for write access and gives up without trying says so in its own
    // words; one that checks and moves on is no denial.
    cases.push(
        case(
            "write check named by the tool",
            &format!(
                "test -w {out} || {{ echo \"cannot rehash: {out} isn't writable\" >&2; exit 1; }}"
            ),
            &[("file_write", "@OUT@")],
        )
        .watched_by_default(),
    );
    cases.push(case(
        "write check it moves on from",
        &format!("test -w {out} || true; exit 3"),
        &[],
    ));
    // A package manager installing into a directory outside (pip from a local wheel: no index).
    let pip = std::process::Command::new(&py)
        .args(["-m", "pip", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if pip {
        write_wheel(&tree.cwd.join("hello-0.1-py3-none-any.whl"));
        cases.push(case(
            "pip install into a target outside",
            &format!("{py} -m pip install -q --no-index --disable-pip-version-check --target {out}/site ./hello-0.1-py3-none-any.whl"),
            &[("file_write", "@OUT@/site")],
        ).watched_by_default());
    } else {
        eprintln!("skipped: pip install (no pip for {py})");
    }
    // npm installing a local package into a prefix outside: it also tries to make its cache
    // in HOME, which the default profile does not let it write. The text names neither
    // (npm reports the prefix as ENOENT and its logs as "an error writing to the directory").
    if has("npm") {
        std::fs::create_dir_all(tree.cwd.join("npmpkg")).unwrap();
        std::fs::write(
            tree.cwd.join("npmpkg/package.json"),
            r#"{"name":"hello","version":"0.1.0"}"#,
        )
        .unwrap();
        std::fs::write(tree.cwd.join("npmpkg/index.js"), "module.exports = 1;\n").unwrap();
        cases.push(
            case(
                "npm install into a prefix outside",
                &format!("npm install --offline --no-audit --no-fund --prefix {out}/app ./npmpkg"),
                &[("file_write", "@HOME@/.npm"), ("file_write", "@OUT@/app")],
            )
            // npm reports the refused `mkdir` of the prefix as Node's masked ENOENT, which the
            // text reads; the cache's is named only below the directory that was refused.
            .by_text(&[("file_write", "@OUT@/app")])
            .watched_by_default(),
        );
    } else {
        eprintln!("skipped: npm (not installed)");
    }
    // Go: a static binary of its own runtime, raw system calls, no libc.
    if let Some(go_bin) = build_go(&tree.root, &out, port) {
        let go = go_bin.display().to_string();
        cases.push(
            case(
                "static Go binary writes outside",
                &format!("{go} write"),
                &[("file_write", "@OUT@/go.txt")],
            )
            .by_text(&[]),
        );
        cases.push(case(
            "static Go binary writes inside",
            &format!("{go} inside"),
            &[],
        ));
        cases.push(case(
            "static Go binary dials TCP",
            &format!("{go} dial"),
            &[("network", &format!("127.0.0.1:{port}"))],
        ));
    } else {
        eprintln!("skipped: Go (no go toolchain)");
    }
    if linked {
        cases.push(
            case(
                "static binary",
                &static_bin.display().to_string(),
                &[("file_write", "@OUT@/static")],
            )
            .by_text(&[]),
        );
    }

    // The full observer (forced on), then the default scope (network calls and directory
    // creations from the kernel,
    // file denials from the text), each against its own labels.
    for scope in ["on", "light"] {
        run_corpus(&tree, &cases, scope, &out, &daemon);
    }
}

fn run_corpus(tree: &Tree, cases: &[Case], scope: &str, out: &str, daemon: &UnixListener) {
    let (mut right, mut found, mut labelled) = (0usize, 0usize, 0usize);
    let mut wrong = Vec::new();
    let mut skipped = Vec::new();
    for c in cases {
        let tool = c.script.split_whitespace().next().unwrap_or("");
        if !tool.starts_with('/')
            && !tool.starts_with('{')
            && !["ls", "mkdir", "cat", "touch", "make", "test"].contains(&tool)
            && !has(tool)
        {
            skipped.push(c.name);
            continue;
        }
        let output = tree
            .cordon()
            .env("CORDON_OBSERVER", scope)
            .args(["run", "--json"])
            .args(&c.flags)
            .args(["--", "sh", "-c", &c.script])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {output:?}", c.name));
        let got: BTreeSet<(String, String)> = v["denials"]
            .as_array()
            .into_iter()
            .flatten()
            .inspect(|d| {
                // In the default scope file denials come from the text, but for the calls it
                // watches.
                let text = scope == "light"
                    && !c.watched_by_default
                    && d["operation"]
                        .as_str()
                        .is_some_and(|o| o.starts_with("file_"));
                let evidence = if text { "text" } else { "seccomp_observer" };
                if d["evidence"] != evidence {
                    wrong.push(format!(
                        "{}: evidence {}, labelled {evidence}: {d}",
                        c.name, d["evidence"]
                    ));
                }
            })
            .map(|d| {
                (
                    d["operation"].as_str().unwrap_or("").to_owned(),
                    d["target"]
                        .as_str()
                        .unwrap_or("")
                        .replace(out, "@OUT@")
                        .replace(&tree.home.display().to_string(), "@HOME@"),
                )
            })
            .collect();
        let labels = match (&c.by_text, scope) {
            (Some(by_text), "light") if !c.watched_by_default => by_text,
            _ => &c.expected,
        };
        let want: BTreeSet<(String, String)> = labels
            .iter()
            .map(|(o, t)| ((*o).to_owned(), t.clone()))
            .collect();
        // From outside: the daemon hears only the allowed client.
        match c.name {
            "daemon over a unix socket" => {
                assert!(daemon.accept().is_err(), "reached while denied")
            }
            "daemon reached when allowed" => {
                assert!(daemon.accept().is_ok(), "not reached when allowed")
            }
            _ => {}
        }
        found += got.len();
        labelled += want.len();
        right += got.intersection(&want).count();
        if got != want {
            wrong.push(format!(
                "{}: got {got:?}, labelled {want:?}; stderr {}",
                c.name, v["stderr"]
            ));
        }
    }
    eprintln!("observer corpus, scope {scope}: {} cases, {labelled} labelled denials, {found} found, {right} right; skipped {skipped:?}", cases.len());
    assert!(
        skipped.is_empty(),
        "tools missing (.ci/run installs them): {skipped:?}"
    );
    assert!(
        wrong.is_empty(),
        "scope {scope}: precision {right}/{found}, recall {right}/{labelled}:\n{}",
        wrong.join("\n")
    );
}

/// A minimal wheel (one module, its metadata), so that pip installs without an index.
fn write_wheel(path: &std::path::Path) {
    let script = format!(
        "import zipfile\nw = zipfile.ZipFile({path:?}, 'w')\n\
         w.writestr('hello/__init__.py', 'x = 1\\n')\n\
         w.writestr('hello-0.1.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: hello\\nVersion: 0.1\\n')\n\
         w.writestr('hello-0.1.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: cordon-tests\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         w.writestr('hello-0.1.dist-info/RECORD', 'hello/__init__.py,,\\nhello-0.1.dist-info/METADATA,,\\nhello-0.1.dist-info/WHEEL,,\\nhello-0.1.dist-info/RECORD,,\\n')\n\
         w.close()\n"
    );
    let made = std::process::Command::new(common::python())
        .args(["-c", &script])
        .status()
        .expect("run python");
    assert!(made.success(), "cannot write the test wheel");
}

/// A static Go program (`CGO_ENABLED=0`) that writes outside, writes inside, or dials TCP,
/// built outside the sandbox; `None` without a Go toolchain.
fn build_go(root: &std::path::Path, out: &str, port: u16) -> Option<std::path::PathBuf> {
    if !has("go") {
        return None;
    }
    let dir = root.join("goprobe");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.go"),
        format!(
            r#"package main

import (
	"fmt"
	"net"
	"os"
)

func main() {{
	switch os.Args[1] {{
	case "write":
		if os.WriteFile("{out}/go.txt", []byte("x"), 0o644) != nil {{
			os.Exit(1)
		}}
	case "inside":
		if os.WriteFile("go-inside.txt", []byte("x"), 0o644) != nil {{
			os.Exit(1)
		}}
		os.Exit(2)
	case "dial":
		if _, err := net.Dial("tcp", "127.0.0.1:{port}"); err != nil {{
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}}
	}}
}}
"#
        ),
    )
    .unwrap();
    std::fs::write(dir.join("go.mod"), "module goprobe\n\ngo 1.18\n").unwrap();
    let bin = root.join("goprobe-bin");
    let built = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&dir)
        .env("CGO_ENABLED", "0")
        .env("GOCACHE", root.join("gocache"))
        .env("GOPATH", root.join("gopath"))
        .env("GOFLAGS", "-mod=mod")
        .status()
        .is_ok_and(|s| s.success());
    assert!(built, "go build of the probe failed");
    Some(bin)
}
