//! `network.mode = "proxy"` and host ports, end to end through the CLI, all on this machine's
//! loopback: upstream servers listen in the host's namespace on ephemeral ports and are reached
//! by made-up names through the proxy's resolver hook (`CORDON_PROXY_HOSTS`, a hosts file the
//! parent reads; the machine's /etc/hosts is never touched). Each upstream records every
//! connection it accepts, so a test can check from outside that a refused connection never
//! arrived.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{python, stderr, stdout, userns_available, without_userns, Tree};
use serde_json::Value;

/// The body every [`Upstream`] answers with.
const BODY: &str = "upstream says hi\n";

/// A plain HTTP server on 127.0.0.1 in the host's namespace that records each request head.
struct Upstream {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Upstream {
    fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&heads);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    seen.lock().unwrap().push(head);
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
                        BODY.len()
                    );
                });
            }
        });
        Upstream { port, heads }
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// Writes the hosts file the proxy resolves with.
fn hosts_file(tree: &Tree, entries: &[(&str, &str)]) -> PathBuf {
    let path = tree.root.join("proxy-hosts");
    let text: String = entries
        .iter()
        .map(|(ip, name)| format!("{ip} {name}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// `cordon run ARGS...` with the proxy's resolver hook.
fn run(tree: &Tree, hosts: &Path, args: &[&str]) -> Output {
    command(tree, hosts, args).output().expect("spawn cordon")
}

fn command(tree: &Tree, hosts: &Path, args: &[&str]) -> Command {
    let mut cmd = tree.cordon();
    cmd.env("CORDON_PROXY_HOSTS", hosts).arg("run").args(args);
    cmd
}

fn json(out: &Output) -> Value {
    serde_json::from_str(stdout(out).trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {}\nstderr: {}",
            stdout(out),
            stderr(out)
        )
    })
}

fn skip_without_namespaces() -> bool {
    if !userns_available() {
        eprintln!("SKIPPED: proxy mode needs user namespaces");
        return true;
    }
    false
}

#[test]
fn curl_and_python_urllib_reach_an_allowed_host_by_name() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(&tree, &[("127.0.0.1", "upstream.test")]);
    let allow = format!("upstream.test:{}", up.port);
    let url = format!("http://upstream.test:{}/simple/?q=1", up.port);
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            &url,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), BODY);
    let py = format!(
        "import urllib.request; print(urllib.request.urlopen({url:?}, timeout=20).read().decode(), end='')"
    );
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            python().to_str().unwrap(),
            "-c",
            &py,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), BODY);
    // The proxy also listens on the sandbox's ::1.
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            "-x",
            "http://[::1]:3128",
            &url,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), BODY);
    // Forwarded in origin form, with the Host of the URL and no proxy headers.
    let heads = up.heads();
    assert_eq!(heads.len(), 3, "{heads:?}");
    for head in &heads {
        assert!(head.starts_with("GET /simple/?q=1 HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("Host: upstream.test:{}\r\n", up.port)),
            "{head}"
        );
        assert!(head.contains("Connection: close\r\n"), "{head}");
        assert!(!head.to_ascii_lowercase().contains("proxy-"), "{head}");
    }
}

#[test]
fn a_host_not_allowed_gets_a_403_and_a_denial_record_and_nothing_reaches_it() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(
        &tree,
        &[("127.0.0.1", "upstream.test"), ("127.0.0.1", "other.test")],
    );
    let allow = format!("upstream.test:{}", up.port);
    let url = format!("http://other.test:{}/", up.port);
    // The body a person sees says what was refused and how to allow it.
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "curl",
            "-sS",
            "-m",
            "20",
            "-w",
            "%{http_code}",
            &url,
        ],
    );
    let body = stdout(&out);
    assert!(body.ends_with("403"), "{body}");
    // The command succeeded (curl without -f), and cordon still says what the proxy refused.
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains(&format!("cordon: denied network access to other.test:{} (other.test:{} is not in network.allow; allow with --allow-domain other.test) (from cordon's proxy)", up.port, up.port)),
        "{}",
        stderr(&out)
    );
    assert!(
        body.contains(&format!("network access to other.test:{} denied", up.port))
            && body.contains("allow with --allow-domain other.test"),
        "{body}"
    );
    // A client that fails on it is a denied run, known from the proxy itself.
    let out = run(
        &tree,
        &hosts,
        &[
            "--json",
            "--allow-domain",
            &allow,
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            &url,
        ],
    );
    let v = json(&out);
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(v["exit_code"], 22);
    let denial = &v["denials"][0];
    assert_eq!(denial["operation"], "network");
    assert_eq!(denial["target"], format!("other.test:{}", up.port));
    assert_eq!(denial["allow_with"], "--allow-domain other.test");
    assert_eq!(denial["evidence"], "proxy");
    assert!(
        denial["rule"]
            .as_str()
            .unwrap()
            .contains("not in network.allow"),
        "{denial}"
    );
    // Same port, same address as the allowed name: only the rules kept it out.
    assert_eq!(up.heads(), Vec::<String>::new());
    // The allowed name in the same configuration does get through.
    let ok = format!("http://upstream.test:{}/", up.port);
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            &ok,
        ],
    );
    assert_eq!(stdout(&out), BODY, "{}", stderr(&out));
    assert_eq!(up.heads().len(), 1);
}

#[test]
fn deny_wins_over_allow_and_wildcards_never_open_loopback_or_the_metadata_address() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(
        &tree,
        &[
            ("127.0.0.1", "api.upstream.test"),
            ("127.0.0.1", "blocked.upstream.test"),
            ("169.254.169.254", "metadata.upstream.test"),
        ],
    );
    let profile = tree.root.join("proxy.toml");
    std::fs::write(
        &profile,
        format!(
            "extends = \"workspace-write\"\n[network]\nmode = \"proxy\"\nallow = [\"*.upstream.test\", \"api.upstream.test:{port}\", \"blocked.upstream.test\"]\ndeny = [\"blocked.upstream.test\"]\n",
            port = up.port
        ),
    )
    .unwrap();
    let probe = |host: &str| -> Value {
        let url = format!("http://{host}:{}/", up.port);
        let out = run(
            &tree,
            &hosts,
            &[
                "--json",
                "-p",
                profile.to_str().unwrap(),
                "--",
                "curl",
                "-sS",
                "-f",
                "-m",
                "20",
                &url,
            ],
        );
        json(&out)
    };
    // Named exactly: loopback is reachable (the harmless counterpart).
    let v = probe("api.upstream.test");
    assert_eq!(v["outcome"], "success", "{v}");
    assert_eq!(v["stdout"], BODY);
    assert_eq!(up.heads().len(), 1);
    // Deny wins over the exact allow entry.
    let v = probe("blocked.upstream.test");
    assert_eq!(v["outcome"], "denied", "{v}");
    let rule = v["denials"][0]["rule"].as_str().unwrap().to_owned();
    assert!(
        rule.contains("network.deny entry \"blocked.upstream.test\""),
        "{rule}"
    );
    // The wildcard covers the name, but not the metadata service it resolves to.
    let v = probe("metadata.upstream.test");
    assert_eq!(v["outcome"], "denied", "{v}");
    let rule = v["denials"][0]["rule"].as_str().unwrap().to_owned();
    assert!(
        rule.contains("169.254.169.254") && rule.contains("metadata"),
        "{rule}"
    );
    assert_eq!(
        v["denials"][0]["allow_with"],
        format!("--allow-domain metadata.upstream.test:{}", up.port)
    );
    // The metadata address by number is in no allow entry at all.
    let out = run(
        &tree,
        &hosts,
        &[
            "--json",
            "-p",
            profile.to_str().unwrap(),
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            "http://169.254.169.254/latest/meta-data/",
        ],
    );
    let v = json(&out);
    assert_eq!(v["denials"][0]["target"], "169.254.169.254:80", "{v}");
    // A wildcard name on loopback (the host's own services) is refused too.
    let hosts = hosts_file(&tree, &[("127.0.0.1", "db.upstream.test")]);
    let url = format!("http://db.upstream.test:{}/", up.port);
    let out = run(
        &tree,
        &hosts,
        &[
            "--json",
            "-p",
            profile.to_str().unwrap(),
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            &url,
        ],
    );
    let v = json(&out);
    assert!(
        v["denials"][0]["rule"]
            .as_str()
            .unwrap()
            .contains("loopback"),
        "{v}"
    );
    assert_eq!(up.heads().len(), 1, "only the exact name got through");
}

#[test]
fn https_goes_through_connect_with_tls_end_to_end() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let (cert, key) = (tree.root.join("cert.pem"), tree.root.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=secure.test",
            "-addext",
            "subjectAltName=DNS:secure.test",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl is required by this test");
    assert!(made.status.success(), "{}", stderr(&made));
    let server = format!(
        r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"tls says hi\n"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        sys.stderr.write("request\n"); sys.stderr.flush()
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain({cert:?}, {key:?})
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#,
        cert = cert.to_str().unwrap(),
        key = key.to_str().unwrap()
    );
    let mut child = KillOnDrop(
        Command::new(python())
            .args(["-c", &server])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut port = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let port = port.trim().to_owned();
    let hosts = hosts_file(&tree, &[("127.0.0.1", "secure.test")]);
    let url = format!("https://secure.test:{port}/");
    let allow = format!("secure.test:{port}");
    // --cacert: the certificate curl checks is the server's own, so the proxy relayed TLS
    // untouched.
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            "--cacert",
            cert.to_str().unwrap(),
            &url,
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "tls says hi\n");
    // CONNECT to a port the entry does not name is refused before any byte reaches the server.
    let other = format!("secure.test:{}", port.parse::<u16>().unwrap() ^ 1);
    let out = run(
        &tree,
        &hosts,
        &[
            "--json",
            "--allow-domain",
            &other,
            "--",
            "curl",
            "-sS",
            "-f",
            "-m",
            "20",
            "--cacert",
            cert.to_str().unwrap(),
            &url,
        ],
    );
    let v = json(&out);
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(v["denials"][0]["target"], format!("secure.test:{port}"));
    child.0.kill().ok();
    let mut log = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert_eq!(log.matches("request").count(), 1, "{log}");
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn socks5_clients_get_the_same_rules() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(
        &tree,
        &[("127.0.0.1", "upstream.test"), ("127.0.0.1", "other.test")],
    );
    let allow = format!("upstream.test:{}", up.port);
    let socks = |host: &str| {
        let url = format!("http://{host}:{}/", up.port);
        run(
            &tree,
            &hosts,
            &[
                "--json",
                "--allow-domain",
                &allow,
                "--",
                "curl",
                "-sS",
                "-m",
                "20",
                "--proxy",
                "socks5h://127.0.0.1:3128",
                &url,
            ],
        )
    };
    let v = json(&socks("upstream.test"));
    assert_eq!(v["outcome"], "success", "{v}");
    assert_eq!(v["stdout"], BODY);
    let v = json(&socks("other.test"));
    assert_eq!(v["outcome"], "denied", "{v}");
    assert_eq!(v["denials"][0]["target"], format!("other.test:{}", up.port));
    // SOCKS5 reply 2, "connection not allowed by ruleset", as curl reports it.
    assert_eq!(v["exit_code"], 97);
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("SOCKS5 connection to other.test. (2)"),
        "{v}"
    );
    assert_eq!(up.heads().len(), 1);
}

#[test]
fn a_client_that_ignores_the_proxy_reaches_nothing() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(&tree, &[("127.0.0.1", "upstream.test")]);
    let allow = format!("upstream.test:{}", up.port);
    // Straight at the upstream's address and port, as a client without proxy support would:
    // inside, 127.0.0.1 is the sandbox's own loopback, where nothing listens on that port.
    let script = format!(
        "print(attempt(lambda: socket.create_connection(('127.0.0.1', {port}), timeout=5)))\n\
         print(attempt(lambda: socket.create_connection(('::1', {port}), timeout=5)))\n\
         import urllib.request\n\
         print(urllib.request.urlopen('http://upstream.test:{port}/', timeout=20).read().decode(), end='')",
        port = up.port
    );
    let out = command(&tree, &hosts, &["--allow-domain", &allow])
        .args([
            "--",
            python().to_str().unwrap(),
            "-c",
            &format!("{}\n{script}", common::PROBE),
        ])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&out),
        format!("ECONNREFUSED\nECONNREFUSED\n{BODY}"),
        "{}",
        stderr(&out)
    );
    // Only the proxied request arrived.
    assert_eq!(up.heads().len(), 1);
    // curl told to skip the proxy for every host finds no way out either, and NO_PROXY
    // inside names only the sandbox's own loopback.
    let url = format!("http://upstream.test:{}/", up.port);
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "sh",
            "-c",
            &format!("echo \"$NO_PROXY\"; curl -sS -m 10 --noproxy '*' {url}; echo \" rc=$?\""),
        ],
    );
    let text = stdout(&out);
    assert!(text.starts_with("localhost,127.0.0.1,::1\n"), "{text}");
    assert!(
        text.ends_with(" rc=6\n"),
        "could not resolve host expected: {text}"
    );
    assert_eq!(up.heads().len(), 1);
}

#[test]
fn a_host_port_reaches_exactly_that_port_on_the_host() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let (allowed, neighbour) = (Upstream::start(), Upstream::start());
    let hosts = hosts_file(&tree, &[]);
    let script = |port: u16| {
        format!(
            "s = None\n\
             def talk():\n    global s\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=5); s.sendall(b'GET /db HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n\
             r = attempt(talk)\n\
             print(r, s.recv(1000).decode().split('\\r\\n')[0] if r == 'OK' else '')"
        )
    };
    for mode in ["proxy", "loopback"] {
        let port = allowed.port.to_string();
        let out = command(
            &tree,
            &hosts,
            &["--network", mode, "--allow-host-port", &port],
        )
        .args([
            "--",
            python().to_str().unwrap(),
            "-c",
            &format!(
                "{}\n{}\n{}",
                common::PROBE,
                script(allowed.port),
                script(neighbour.port)
            ),
        ])
        .output()
        .unwrap();
        assert_eq!(
            stdout(&out),
            "OK HTTP/1.1 200 OK\nECONNREFUSED \n",
            "{mode}: {}",
            stderr(&out)
        );
    }
    assert_eq!(allowed.heads().len(), 2);
    assert_eq!(
        neighbour.heads(),
        Vec::<String>::new(),
        "the neighbouring port stayed silent"
    );
    // Naming the host's loopback in the proxy's allow list is refused with the way to do it.
    let out = run(
        &tree,
        &hosts,
        &["--allow-domain", "localhost:5432", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(
        stderr(&out).contains("network.host_ports"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn git_clone_over_http_through_the_proxy() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let served = tree.outside.join("served");
    std::fs::create_dir(&served).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    };
    let src = tree.outside.join("src");
    std::fs::create_dir(&src).unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    std::fs::write(src.join("README"), "cloned through cordon\n").unwrap();
    git(
        &src,
        &["-c", "user.name=t", "-c", "user.email=t@t", "add", "README"],
    );
    git(
        &src,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    );
    git(
        &tree.outside,
        &["clone", "-q", "--bare", "src", "served/repo.git"],
    );
    git(&served.join("repo.git"), &["update-server-info"]);
    let (server, port) = static_server(&served);
    let hosts = hosts_file(&tree, &[("127.0.0.1", "git.test")]);
    let allow = format!("git.test:{port}");
    let url = format!("http://git.test:{port}/repo.git");
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "git",
            "clone",
            "-q",
            &url,
            "clone",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(tree.cwd.join("clone/README")).unwrap(),
        "cloned through cordon\n"
    );
    drop(server);
}

#[test]
fn pip_download_from_a_local_index_through_the_proxy() {
    if skip_without_namespaces() {
        return;
    }
    let pip = Command::new(python())
        .args(["-m", "pip", "--version"])
        .output()
        .unwrap();
    assert!(
        pip.status.success(),
        "pip is required by this test (.ci/run installs it)"
    );
    let tree = Tree::new();
    let index = tree.outside.join("index");
    let wheel_dir = index.join("simple/cordtest");
    std::fs::create_dir_all(&wheel_dir).unwrap();
    // A minimal pure-Python wheel, made by hand: pip download checks its name and metadata.
    let make_wheel = format!(
        r#"
import zipfile, hashlib, base64
name = "cordtest-1.0-py3-none-any.whl"
files = {{
    "cordtest/__init__.py": b"",
    "cordtest-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: cordtest\nVersion: 1.0\n",
    "cordtest-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}}
record = ""
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{{path}},sha256={{digest}},{{len(data)}}\n"
record += "cordtest-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile({dir:?} + "/" + name, "w") as z:
    for path, data in files.items():
        z.writestr(path, data)
    z.writestr("cordtest-1.0.dist-info/RECORD", record)
open({dir:?} + "/index.html", "w").write(f'<a href="{{name}}">{{name}}</a>\n')
"#,
        dir = wheel_dir.to_str().unwrap()
    );
    let made = Command::new(python())
        .args(["-c", &make_wheel])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr(&made));
    let (server, port) = static_server(&index);
    let hosts = hosts_file(&tree, &[("127.0.0.1", "pypi.test")]);
    let allow = format!("pypi.test:{port}");
    let url = format!("http://pypi.test:{port}/simple/");
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            python().to_str().unwrap(),
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--index-url",
            &url,
            "--trusted-host",
            "pypi.test",
            "-d",
            "dl",
            "cordtest",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(tree.cwd.join("dl/cordtest-1.0-py3-none-any.whl").is_file());
    drop(server);
}

/// `python3 -m http.server` serving `dir` on an ephemeral loopback port, in the host's
/// namespace.
fn static_server(dir: &Path) -> (KillOnDrop, u16) {
    let script = "import http.server, functools, sys\n\
        h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])\n\
        s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), h)\n\
        print(s.server_address[1], flush=True)\n\
        s.serve_forever()";
    let mut child = KillOnDrop(
        Command::new(python())
            .args(["-c", script])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut port = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    (child, port.trim().parse().unwrap())
}

#[test]
fn without_user_namespaces_proxy_is_refused_or_denied_as_enforcement_says() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(&tree, &[("127.0.0.1", "upstream.test")]);
    let allow = format!("upstream.test:{}", up.port);
    let url = format!("http://upstream.test:{}/", up.port);
    let out = without_userns(&command(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            "curl",
            "-sS",
            "-m",
            "10",
            &url,
        ],
    ))
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("network_proxy"), "{}", stderr(&out));
    // Under report: the network is denied instead, said before the command runs.
    let profile = tree.root.join("report.toml");
    std::fs::write(
        &profile,
        "extends = \"workspace-write\"\nenforcement = \"report\"\n[network]\nmode = \"proxy\"\n",
    )
    .unwrap();
    let out = without_userns(&command(
        &tree,
        &hosts,
        &[
            "-p",
            profile.to_str().unwrap(),
            "--allow-domain",
            &allow,
            "--",
            "sh",
            "-c",
            &format!("echo $CORDON_SANDBOX_NETWORK_DISABLED; curl -sS -m 10 {url}; echo rc=$?"),
        ],
    ))
    .output()
    .unwrap();
    assert!(
        stderr(&out).contains("not enforced: network_proxy"),
        "{}",
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(
        text.starts_with("1\n") && text.ends_with("rc=7\n"),
        "{text}"
    );
    assert_eq!(up.heads(), Vec::<String>::new());
    // A published port is not left open on the host for a sandbox that has no network.
    let host_port = free_port();
    let publish = format!("3000:{host_port}");
    let mut child = KillOnDrop(
        without_userns(&command(
            &tree,
            &hosts,
            &[
                "-p",
                profile.to_str().unwrap(),
                "--publish",
                &publish,
                "--",
                "sh",
                "-c",
                "echo started; sleep 5",
            ],
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    let mut started = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut started)
        .unwrap();
    assert_eq!(started, "started\n");
    let conn = std::net::TcpStream::connect(("127.0.0.1", host_port));
    assert_eq!(
        conn.map(|_| ()).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused)
    );
}

/// A free port on the host's loopback (bound and released; the race with another process
/// taking it in between is accepted for a test).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_published_dev_server_is_answered_from_outside_while_the_run_lasts() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    std::fs::write(tree.cwd.join("index.html"), "dev server inside\n").unwrap();
    let host_port = free_port();
    let hosts = hosts_file(&tree, &[]);
    // The server inside binds its own loopback only; it stops by itself after a few requests
    // (or the run's timeout).
    let server = "import http.server, sys\n\
        s = http.server.HTTPServer(('127.0.0.1', 3000), http.server.SimpleHTTPRequestHandler)\n\
        print('up', flush=True)\n\
        for _ in range(2): s.handle_request()\n";
    for mode in ["proxy", "loopback"] {
        let publish = format!("3000:{host_port}");
        let mut child = KillOnDrop(
            command(
                &tree,
                &hosts,
                &["--network", mode, "--publish", &publish, "--timeout", "30s"],
            )
            .args(["--", python().to_str().unwrap(), "-c", server])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        );
        let mut up = String::new();
        BufReader::new(child.0.stdout.take().unwrap())
            .read_line(&mut up)
            .unwrap();
        assert_eq!(up, "up\n", "{mode}");
        for address in ["127.0.0.1", "::1"] {
            let mut conn = std::net::TcpStream::connect((address, host_port)).unwrap();
            write!(conn, "GET /index.html HTTP/1.0\r\n\r\n").unwrap();
            let mut answer = String::new();
            conn.read_to_string(&mut answer).unwrap();
            assert!(
                answer.starts_with("HTTP/1.0 200 OK"),
                "{mode} {address}: {answer}"
            );
            assert!(
                answer.ends_with("\r\n\r\ndev server inside\n"),
                "{mode} {address}: {answer}"
            );
        }
        let status = child.0.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{mode}");
        // The run is over: the host port is closed with it.
        let after = std::net::TcpStream::connect(("127.0.0.1", host_port));
        assert_eq!(
            after.map(|_| ()).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::ConnectionRefused),
            "{mode}"
        );
    }
    // A host port already taken refuses the run before anything runs.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let publish = format!("3000:{}", taken.local_addr().unwrap().port());
    let out = run(
        &tree,
        &hosts,
        &[
            "--network",
            "loopback",
            "--publish",
            &publish,
            "--",
            "touch",
            "ran",
        ],
    );
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("network.publish: cannot listen on 127.0.0.1"),
        "{}",
        stderr(&out)
    );
    assert!(!tree.cwd.join("ran").exists());
}

#[test]
fn tricky_requests_reach_only_the_allowed_host() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(
        &tree,
        &[("127.0.0.1", "upstream.test"), ("127.0.0.1", "evil.test")],
    );
    let allow = format!("upstream.test:{}", up.port);
    // Raw requests on the proxy's port, as a hostile client would write them; each prints the
    // status line (or SOCKS5 reply code) it got.
    let script = format!(
        r#"
import socket
PORT = {port}
def http(raw):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(raw.encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk: break
        data += chunk
    return data.split(b"\r\n")[0].decode()
def socks(atyp, addr):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"\x05\x01\x00"); s.recv(2)
    s.sendall(b"\x05\x01\x00" + bytes([atyp]) + addr + PORT.to_bytes(2, "big"))
    return "socks %d" % s.recv(10)[1]
print(http(f"GET http://upstream.test:{{PORT}}@evil.test:{{PORT}}/ HTTP/1.1\r\nHost: x\r\n\r\n"))
print(http(f"GET / HTTP/1.1\r\nHost: upstream.test:{{PORT}}\r\n\r\n"))
print(http(f"CONNECT evil.test:{{PORT}} HTTP/1.1\r\n\r\n"))
print(http(f"GET http://EVIL.test.:{{PORT}}/ HTTP/1.1\r\n\r\n"))
print(http(f"GET http://0x7f000001:{{PORT}}/ HTTP/1.1\r\n\r\n"))
print(http(f"GET http://[::ffff:127.0.0.1]:{{PORT}}/ HTTP/1.1\r\n\r\n"))
print(http(f"GET https://upstream.test:{{PORT}}/ HTTP/1.1\r\n\r\n"))
print(socks(1, bytes([127, 0, 0, 1])))
print(socks(3, bytes([9]) + b"evil.test"))
print(http(f"GET http://Upstream.TEST.:{{PORT}}/ok HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: x\r\n\r\n"))
"#,
        port = up.port
    );
    let out = run(
        &tree,
        &hosts,
        &[
            "--allow-domain",
            &allow,
            "--",
            python().to_str().unwrap(),
            "-c",
            &script,
        ],
    );
    assert_eq!(
        stdout(&out),
        "HTTP/1.1 400 Bad Request\n\
         HTTP/1.1 400 Bad Request\n\
         HTTP/1.1 403 Forbidden\n\
         HTTP/1.1 403 Forbidden\n\
         HTTP/1.1 403 Forbidden\n\
         HTTP/1.1 403 Forbidden\n\
         HTTP/1.1 400 Bad Request\n\
         socks 2\n\
         socks 2\n\
         HTTP/1.1 200 OK\n",
        "{}",
        stderr(&out)
    );
    // Only the last request arrived, for the allowed name, with its own Host.
    let heads = up.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(heads[0].starts_with("GET /ok HTTP/1.1\r\n"), "{}", heads[0]);
    assert!(
        heads[0].contains(&format!("Host: Upstream.TEST.:{}\r\n", up.port)),
        "{}",
        heads[0]
    );
    assert!(
        !heads[0].contains("evil") && !heads[0].contains("Proxy-Authorization"),
        "{}",
        heads[0]
    );
}

#[test]
fn a_login_shells_own_proxy_settings_do_not_override_cordons() {
    if skip_without_namespaces() {
        return;
    }
    let tree = Tree::new();
    let up = Upstream::start();
    let hosts = hosts_file(&tree, &[("127.0.0.1", "upstream.test")]);
    // What a developer's startup file may well hold; the shell snapshot replays its exports.
    std::fs::write(
        tree.home.join(".bash_profile"),
        "export NO_PROXY='*' no_proxy='*' http_proxy=http://corporate.example:8080 HTTP_PROXY=http://corporate.example:8080\nexport MY_SETTING=kept\n",
    )
    .unwrap();
    let allow = format!("upstream.test:{}", up.port);
    let script = format!(
        "echo \"$MY_SETTING $NO_PROXY $http_proxy\"; curl -sS -f -m 20 http://upstream.test:{}/",
        up.port
    );
    let out = run(
        &tree,
        &hosts,
        &["--allow-domain", &allow, "--", "bash", "-lc", &script],
    );
    assert_eq!(
        stdout(&out),
        format!("kept localhost,127.0.0.1,::1 http://127.0.0.1:3128\n{BODY}"),
        "{}",
        stderr(&out)
    );
    assert_eq!(up.heads().len(), 1);
}
