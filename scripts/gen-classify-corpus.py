#!/usr/bin/env python3
"""Regenerates the labelled denial corpus under tests/fixtures/classify/.

Every case runs for real: once through `cordon-sandbox` with the case's policy, and once
outside it as a control (the control's exit code and stderr are kept in the fixture so that a
reader can see the tool works without the sandbox, or fails the same way for its own reasons).

Machine-specific paths are replaced by placeholders so fixtures are stable:

    @BASE@   a fresh temporary directory holding:
    @BASE@/cwd    the command's working directory (writable root)
    @BASE@/tmp    TMPDIR and tool caches (writable root)
    @BASE@/home   HOME (NOT writable: like a real home outside the workspace)
    @BASE@/out    a directory outside every writable root

The test (`tests/classify_corpus.rs`) makes its own base directory, re-creates the case's
`setup` (files, directories, symlinks) in it and substitutes @BASE@ back before classifying,
because symlink resolution needs the symlinks to exist.

Usage:  cargo build --release -p cordon-sandbox && python3 scripts/gen-classify-corpus.py [NAME...]
Needs root (it chowns a file to `nobody`). Network cases assume the machine has no network,
which is true where cordon is developed; labels say "no denial" for every network-enabled case.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import http.server

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HELPER = os.path.join(ROOT, "target", "release", "cordon-sandbox")
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "classify")
TIMEOUT = 60


def cargo_bin_dir():
    try:
        path = subprocess.run(["rustup", "which", "cargo"], capture_output=True, text=True,
                              check=True).stdout.strip()
        return os.path.dirname(path)
    except (OSError, subprocess.CalledProcessError):
        return None


def policy(profile, base):
    cwd, tmp = f"{base}/cwd", f"{base}/tmp"
    read = ["/"]
    if profile == "read-restricted":
        # Enough to run coreutils and bash; HOME, /var and @BASE@/out are not readable.
        read = ["/dev", "/etc", "/proc", "/usr", cwd, tmp]
    net = "enabled" if profile in ("network", "network-unix-deny") else "denied"
    unix = "allow" if profile in ("network", "unix-allow") else "deny"
    return {
        "version": 1,
        "filesystem": {"read": read, "write": [cwd, tmp]},
        "network": {"mode": net, "unix_sockets": unix},
        "enforcement": {"missing_layer": "refuse", "carve_outs": "report"},
    }


def D(operation, target):
    return {"operation": operation, "target": target}


SH = ["bash", "-c"]
PY = ["python3", "-c"]
NODE = ["node", "-e"]
# Not 9 or another "bad port": fetch() refuses those before touching the network.
URL_LOCAL = "http://127.0.0.1:39157/"
URL_REMOTE = "https://example.com/"

# name, profile, argv, expected denials, setup
CASES = []


def case(name, profile, argv, expect=(), setup=None, env=None, need_tool=True, control=True):
    """control=False for cases whose uncontained run would change the machine (a global install)."""
    CASES.append({"name": name, "profile": profile, "argv": argv, "expect": list(expect),
                  "setup": setup or {}, "env": env or {}, "need_tool": need_tool,
                  "control": control})


# ---- filesystem writes that the workspace profile forbids ----
case("touch-etc", "workspace", ["touch", "/etc/cordon-probe"], [D("file_write", "/etc/cordon-probe")])
case("bash-redirect-etc", "workspace", SH + ["echo hi > /etc/cordon-probe"],
     [D("file_write", "/etc/cordon-probe")])
case("bash-append-home", "workspace", SH + ["echo hi >> \"$HOME/.bashrc-probe\""],
     [D("file_write", "@BASE@/home/.bashrc-probe")])
case("touch-home", "workspace", ["touch", "@BASE@/home/notes.txt"],
     [D("file_write", "@BASE@/home/notes.txt")])
case("mkdir-out", "workspace", ["mkdir", "@BASE@/out/newdir"], [D("file_write", "@BASE@/out/newdir")])
case("mkdir-p-etc", "workspace", ["mkdir", "-p", "/etc/cordon-probe-dir/sub"],
     [D("file_write", "/etc/cordon-probe-dir")])
case("cp-into-etc", "workspace", ["cp", "a.txt", "/etc/cordon-probe"],
     [D("file_write", "/etc/cordon-probe")], setup={"files": {"cwd/a.txt": "a\n"}})
case("mv-into-out", "workspace", ["mv", "a.txt", "@BASE@/out/a.txt"],
     [D("file_write", "@BASE@/out/a.txt")], setup={"files": {"cwd/a.txt": "a\n"}})
case("mv-out-of-out", "workspace", ["mv", "@BASE@/out/b.txt", "b.txt"],
     [D("file_write", "@BASE@/out/b.txt")], setup={"files": {"out/b.txt": "b\n"}})
case("rm-out", "workspace", ["rm", "-f", "@BASE@/out/b.txt"],
     [D("file_write", "@BASE@/out/b.txt")], setup={"files": {"out/b.txt": "b\n"}})
case("sed-i-out", "workspace", ["sed", "-i", "s/b/c/", "@BASE@/out/b.txt"],
     [D("file_write", "@BASE@/out")], setup={"files": {"out/b.txt": "b\n"}})
case("tee-etc", "workspace", SH + ["echo hi | tee /etc/cordon-probe"],
     [D("file_write", "/etc/cordon-probe")])
case("python-open-w-etc", "workspace", PY + ["open('/etc/cordon-probe','w').write('x')"],
     [D("file_write", "/etc/cordon-probe")])
case("python-open-a-home", "workspace", PY + ["import os;open(os.environ['HOME']+'/log.txt','a')"],
     [D("file_write", "@BASE@/home/log.txt")])
case("symlink-dir-escape", "workspace", SH + ["echo x > link/escaped.txt"],
     [D("file_write", "@BASE@/out/escaped.txt")], setup={"symlinks": {"cwd/link": "@BASE@/out"}})
case("symlink-file-escape", "workspace", SH + ["echo x > notes.txt"],
     [D("file_write", "@BASE@/out/b.txt")],
     setup={"files": {"out/b.txt": "b\n"}, "symlinks": {"cwd/notes.txt": "@BASE@/out/b.txt"}})
case("touch-via-dotdot", "workspace", ["touch", "../out/rel.txt"], [D("file_write", "@BASE@/out/rel.txt")])
case("two-writes-deduped", "workspace",
     SH + ["touch /etc/cordon-probe; touch /etc/cordon-probe; echo > @BASE@/out/x"],
     [D("file_write", "/etc/cordon-probe"), D("file_write", "@BASE@/out/x")])
# ---- writes and reads the policy allows ----
case("touch-cwd-ok", "workspace", ["touch", "ok.txt"])
case("write-tmp-ok", "workspace", SH + ["echo hi > \"$TMPDIR/x\" && cat \"$TMPDIR/x\""])
case("read-etc-ok", "workspace", ["cat", "/etc/hostname"])
case("dev-null-ok", "workspace", SH + ["echo hi > /dev/null; echo ok"])
case("ls-root-ok", "workspace", ["ls", "/"])
# ---- ordinary permission errors the policy allows ----
case("chmod000-read", "workspace", ["cat", "secret.txt"],
     setup={"files": {"cwd/secret.txt": "s\n"}, "nobody000": ["cwd/secret.txt"]})
case("chmod000-write", "workspace", SH + ["echo x > secret.txt"],
     setup={"files": {"cwd/secret.txt": "s\n"}, "nobody000": ["cwd/secret.txt"]})
case("chmod000-python", "workspace", PY + ["open('secret.txt','w')"],
     setup={"files": {"cwd/secret.txt": "s\n"}, "nobody000": ["cwd/secret.txt"]})
case("not-executable-in-cwd", "workspace", SH + ["./script.sh"],
     setup={"files": {"cwd/script.sh": "#!/bin/sh\necho hi\n"}})
case("exec-error-eacces-readable", "workspace", ["./script.sh"],
     setup={"files": {"cwd/script.sh": "#!/bin/sh\necho hi\n"}}, need_tool=False)
# ---- failures that are not denials ----
case("bash-false", "workspace", SH + ["false"])
case("exit-126", "workspace", SH + ["exit 126"])
case("exit-127", "workspace", SH + ["exit 127"])
case("missing-command-shell", "workspace", SH + ["no-such-command-xyz"])
case("missing-command-exec", "workspace", ["no-such-command-xyz"], need_tool=False)
case("sandbox-word-in-path", "workspace", ["cat", "sandbox-denied/Permission denied.txt"])
case("denied-dir-missing", "workspace", ["touch", "denied/sandbox.txt"])
case("echo-denied-words", "workspace",
     SH + ["echo 'sandbox: operation not permitted, access denied' >&2; exit 3"])
case("ls-missing-etc", "workspace", ["ls", "/etc/no-such-file-cordon"])
case("grep-no-match", "workspace", ["grep", "denied", "/etc/hostname"])
# ---- reads and execs outside readable roots ----
case("read-outside-roots", "read-restricted", ["cat", "@BASE@/out/b.txt"],
     [D("file_read", "@BASE@/out/b.txt")], setup={"files": {"out/b.txt": "b\n"}})
case("ls-outside-roots", "read-restricted", ["ls", "@BASE@/out"],
     [D("file_read", "@BASE@/out")], setup={"files": {"out/b.txt": "b\n"}})
case("exec-outside-roots", "read-restricted", ["@BASE@/out/tool"],
     [D("file_execute", "@BASE@/out/tool")], setup={"copy_true": ["out/tool"]})
case("bash-exec-outside-roots", "read-restricted", SH + ["@BASE@/out/tool"],
     [D("file_execute", "@BASE@/out/tool")], setup={"copy_true": ["out/tool"]})
case("read-inside-roots-ok", "read-restricted", ["cat", "/etc/hostname"])
# ---- network, denied by policy ----
case("curl-denied", "workspace", ["curl", "-sS", URL_LOCAL], [D("network", "127.0.0.1:39157")])
case("curl-dns-denied", "workspace", ["curl", "-sS", URL_REMOTE], [D("network", "example.com:443")])
case("wget-denied", "workspace", ["wget", "--tries=1", "-O", "-", URL_LOCAL], [D("network", "127.0.0.1:39157")])
case("wget-dns-denied", "workspace", ["wget", "--tries=1", "-O", "-", URL_REMOTE], [D("network", "example.com:443")])
case("python-urllib-denied", "workspace",
     PY + [f"import urllib.request;urllib.request.urlopen('{URL_LOCAL}')"], [D("network", "127.0.0.1:39157")])
case("python-socket-denied", "workspace",
     PY + ["import socket;socket.create_connection(('127.0.0.1',39157))"], [D("network", "127.0.0.1:39157")])
case("node-net-denied", "workspace",
     NODE + ["require('net').connect(39157,'127.0.0.1').on('error',e=>{console.error(e);process.exit(1)})"],
     [D("network", "127.0.0.1:39157")])
case("node-fetch-denied", "workspace", NODE + [f"fetch('{URL_LOCAL}').catch(e=>{{console.error(e);process.exit(1)}})"],
     [D("network", "127.0.0.1:39157")])
case("git-clone-http-denied", "workspace", ["git", "clone", "http://127.0.0.1:39157/repo.git"],
     [D("network", "127.0.0.1:39157")])
case("git-clone-https-denied", "workspace", ["git", "clone", "https://example.com/repo.git"],
     [D("network", "example.com:443")])
case("pip-install-denied", "workspace",
     ["pip3", "install", "--no-cache-dir", "--retries", "1", "--timeout", "3", "--target", "deps", "six"],
     [D("network", "pypi.org:443")])
case("npm-view-denied", "workspace", ["npm", "view", "left-pad", "--fetch-retries=0"],
     [D("network", "registry.npmjs.org:443")])
case("npm-install-denied", "workspace", ["npm", "install", "left-pad", "--fetch-retries=0", "--no-audit", "--no-fund"],
     [D("network", "registry.npmjs.org:443")])
case("cargo-search-denied", "workspace", ["cargo", "search", "serde"], [D("network", "index.crates.io:443")])
case("cargo-fetch-denied", "workspace", ["cargo", "fetch"], [D("network", "index.crates.io:443")],
     setup={"files": {"cwd/Cargo.toml": "[package]\nname = \"p\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"1\"\n",
                      "cwd/src/lib.rs": ""}})
case("getent-denied", "workspace", ["getent", "hosts", "example.com"], [D("network", "example.com")])
case("bash-dev-tcp-denied", "workspace", SH + ["echo hi > /dev/tcp/127.0.0.1/39157"], [D("network", "127.0.0.1:39157")])
# ---- network enabled: failures for other reasons are not denials ----
for n in list(CASES):
    if n["name"].endswith("-denied") and n["expect"] and n["expect"][0]["operation"] == "network":
        CASES.append({**n, "name": n["name"][: -len("-denied")] + "-enabled", "profile": "network", "expect": []})
case("curl-local-server-ok", "network", ["curl", "-sS", "http://127.0.0.1:@PORT@/"])
# ---- unix sockets ----
case("python-unix-denied", "workspace",
     PY + ["import socket;s=socket.socket(socket.AF_UNIX);s.connect('/run/cordon-probe.sock')"],
     [D("unix_socket", "/run/cordon-probe.sock")])
case("python-unix-allowed", "unix-allow",
     PY + ["import socket;s=socket.socket(socket.AF_UNIX);s.connect('/run/cordon-probe.sock')"])
case("python-unix-netenabled-denied", "network-unix-deny",
     PY + ["import socket;s=socket.socket(socket.AF_UNIX);s.connect('/run/cordon-probe.sock')"],
     [D("unix_socket", "/run/cordon-probe.sock")])
case("curl-unix-socket-denied", "workspace",
     ["curl", "-sS", "--unix-socket", "/run/cordon-probe.sock", "http://localhost/"],
     [D("unix_socket", "/run/cordon-probe.sock")])
case("curl-unix-socket-allowed", "unix-allow",
     ["curl", "-sS", "--unix-socket", "/run/cordon-probe.sock", "http://localhost/"])
case("docker-denied", "workspace", ["docker", "-H", "unix:///run/cordon-probe.sock", "ps"],
     [D("unix_socket", "/run/cordon-probe.sock")])
case("docker-allowed", "unix-allow", ["docker", "-H", "unix:///run/cordon-probe.sock", "ps"])
case("python-unix-socketfile-in-cwd-allowed", "unix-allow",
     PY + ["import socket;s=socket.socket(socket.AF_UNIX);s.bind('s.sock');s.listen();c=socket.socket(socket.AF_UNIX);c.connect('s.sock');print('ok')"])
# ---- seccomp hardening ----
case("strace-ptrace", "workspace", ["strace", "-f", "-o", "/dev/null", "true"], [D("syscall", "ptrace")])
case("unshare-user", "workspace", ["unshare", "--user", "true"], [D("syscall", "unshare")])

# ---- harder cases: look-alikes the rules must not take for denials, and more tools ----
case("chmod000-outside-cat", "workspace", ["cat", "@BASE@/out/secret.txt"],
     setup={"files": {"out/secret.txt": "s\n"}, "nobody000": ["out/secret.txt"]})
case("chmod000-outside-python-read", "workspace", PY + ["open('@BASE@/out/secret.txt').read()"],
     setup={"files": {"out/secret.txt": "s\n"}, "nobody000": ["out/secret.txt"]})
case("stdout-has-denial-text", "workspace", SH + ["cat log.txt; exit 1"],
     setup={"files": {"cwd/log.txt": "touch: cannot touch '/etc/passwd': Permission denied\n"
                                      "curl: (6) Could not resolve host: example.com\n"}})
case("stderr-replays-log", "workspace", SH + ["echo 'cat: log.txt: Permission denied' >&2; exit 1"],
     setup={"files": {"cwd/log.txt": "x\n"}})
case("curl-file-missing", "workspace", ["curl", "-sS", "file:///nonexistent-cordon"])
case("git-clone-local-missing", "workspace", ["git", "clone", "/nonexistent-cordon/repo"])
case("getent-localhost-ok", "workspace", ["getent", "hosts", "localhost"])
case("getent-passwd-missing", "workspace", ["getent", "passwd", "nosuchuser-cordon"])
case("exec-missing-outside-roots", "read-restricted", ["@BASE@/out/nope"], need_tool=False)
case("node-write-etc", "workspace", NODE + ["require('fs').writeFileSync('/etc/cordon-probe','x')"],
     [D("file_write", "/etc/cordon-probe")])
case("node-mkdir-home", "workspace", NODE + ["require('fs').mkdirSync(process.env.HOME+'/.config-probe')"],
     [D("file_write", "@BASE@/home/.config-probe")])
case("cargo-new-etc", "workspace", ["cargo", "new", "--vcs", "none", "/etc/cordon-probe-dir"],
     [D("file_write", "/etc/cordon-probe-dir")])
case("git-init-etc", "workspace", ["git", "init", "/etc/cordon-probe-dir"],
     [D("file_write", "/etc/cordon-probe-dir")])
case("rm-r-out", "workspace", ["rm", "-rf", "@BASE@/out/d"], [D("file_write", "@BASE@/out/d/f")],
     setup={"files": {"out/d/f": "f\n"}})
case("ssh-add-denied", "workspace", ["ssh-add", "-l"], [D("unix_socket", None)],
     env={"SSH_AUTH_SOCK": "/run/cordon-probe.sock"})
case("ssh-add-allowed", "unix-allow", ["ssh-add", "-l"], env={"SSH_AUTH_SOCK": "/run/cordon-probe.sock"})
case("python-unix-socketfile-in-cwd-denied", "workspace",
     PY + ["import socket;s=socket.socket(socket.AF_UNIX);s.bind('s.sock');s.listen();c=socket.socket(socket.AF_UNIX);c.connect('s.sock');print('ok')"],
     [D("unix_socket", "@BASE@/cwd/s.sock")])
case("perl-socket-denied", "workspace",
     ["perl", "-MIO::Socket::INET", "-e", "IO::Socket::INET->new(PeerAddr=>'127.0.0.1:39157') or die \"connect: $!\\n\""],
     [D("network", "127.0.0.1:39157")])
case("perl-socket-enabled", "network",
     ["perl", "-MIO::Socket::INET", "-e", "IO::Socket::INET->new(PeerAddr=>'127.0.0.1:39157') or die \"connect: $!\\n\""])
case("npm-global-install-write", "network", ["npm", "install", "-g", "left-pad", "--no-audit", "--no-fund"],
     [D("file_write", "/usr/lib/node_modules/left-pad")], control=False)
case("pip-system-install-write", "network",
     ["pip3", "install", "--no-cache-dir", "--break-system-packages", "termcolor"],
     [D("file_write", "/usr/local/lib/python3.11/dist-packages/termcolor")], control=False)

# ---- netcat, socat, dig (apt: netcat-openbsd socat dnsutils) ----
case("nc-denied", "workspace", ["nc", "-z", "-w", "2", "127.0.0.1", "39157"], [D("network", "127.0.0.1:39157")])
case("nc-enabled", "network", ["nc", "-z", "-w", "2", "127.0.0.1", "39157"])
case("nc-v-denied", "workspace", ["nc", "-zv", "-w", "2", "127.0.0.1", "39157"], [D("network", "127.0.0.1:39157")])
case("nc-v-enabled", "network", ["nc", "-zv", "-w", "2", "127.0.0.1", "39157"])
case("nc-usage-error", "workspace", ["nc", "--no-such-option"])
case("nc-unix-denied", "workspace", ["nc", "-U", "/run/cordon-probe.sock"],
     [D("unix_socket", "/run/cordon-probe.sock")])
case("nc-unix-allowed", "unix-allow", ["nc", "-U", "/run/cordon-probe.sock"])
case("socat-denied", "workspace", ["socat", "-", "TCP:127.0.0.1:39157"], [D("network", "127.0.0.1:39157")])
case("socat-enabled", "network", ["socat", "-", "TCP:127.0.0.1:39157"])
case("socat-unix-denied", "workspace", ["socat", "-", "UNIX-CONNECT:/run/cordon-probe.sock"],
     [D("unix_socket", "/run/cordon-probe.sock")])
case("socat-unix-allowed", "unix-allow", ["socat", "-", "UNIX-CONNECT:/run/cordon-probe.sock"])
case("dig-denied", "workspace", ["dig", "+tries=1", "+timeout=2", "example.com"], [D("network", "example.com")])
case("dig-enabled", "network", ["dig", "+tries=1", "+timeout=2", "example.com"])

# ---- the runtime's shape: everything under `bash -lc` (pipelines, several commands) ----
LC = ["bash", "-lc"]
case("wrapped-getent-denied", "workspace", LC + ["getent hosts example.com"], [D("network", "example.com")])
case("wrapped-nc-denied", "workspace", LC + ["cd /tmp && nc -z -w 2 127.0.0.1 39157"],
     [D("network", "127.0.0.1:39157")])
case("wrapped-curl-unix-denied", "workspace",
     LC + ["curl -sS --unix-socket /run/cordon-probe.sock http://localhost/_ping"],
     [D("unix_socket", "/run/cordon-probe.sock")])
case("wrapped-ssh-add-denied", "workspace", LC + ["SSH_AUTH_SOCK=/run/cordon-probe.sock ssh-add -l"],
     [D("unix_socket", None)])
case("wrapped-pipeline-masks-failure", "workspace", LC + [f"curl -sS {URL_LOCAL} | head -c 10"])
case("wrapped-pipefail-curl-denied", "workspace", LC + [f"set -o pipefail; curl -sS {URL_LOCAL} | head -c 10"],
     [D("network", "127.0.0.1:39157")])
case("wrapped-build-then-write-etc", "workspace",
     LC + ["echo building > build.log && cp build.log /etc/cordon-probe && echo done"],
     [D("file_write", "/etc/cordon-probe")])
case("wrapped-grep-then-false", "workspace", LC + ["grep -r denied . ; false"],
     setup={"files": {"cwd/notes.txt": "access denied by sandbox\n"}})


def make_setup(base, setup, uid_nobody=65534):
    for rel, text in setup.get("files", {}).items():
        path = os.path.join(base, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    for rel, target in setup.get("symlinks", {}).items():
        os.symlink(target.replace("@BASE@", base), os.path.join(base, rel))
    for rel in setup.get("nobody000", []):
        path = os.path.join(base, rel)
        os.chown(path, uid_nobody, uid_nobody)
        os.chmod(path, 0)
    for rel in setup.get("copy_true", []):
        shutil.copy(shutil.which("true"), os.path.join(base, rel))


def fresh_base():
    base = os.path.realpath(tempfile.mkdtemp(prefix="cordon-corpus-"))
    for d in ("cwd", "tmp", "home", "out"):
        os.mkdir(os.path.join(base, d))
    return base


def environment(base, extra):
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    cargo = cargo_bin_dir()
    if cargo:
        path = cargo + ":" + path
    env = {
        "PATH": path, "HOME": f"{base}/home", "TMPDIR": f"{base}/tmp", "LANG": "C.UTF-8",
        "npm_config_cache": f"{base}/tmp/npm", "npm_config_update_notifier": "false",
        "CARGO_HOME": f"{base}/tmp/cargo", "CARGO_NET_RETRY": "0",
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", os.path.expanduser("~/.rustup")),
        "GIT_TERMINAL_PROMPT": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.update(extra)
    return env


def run(argv, base, env, pol):
    """Runs argv, through the helper when pol is set. Returns the outcome as plain data."""
    status_r, status_w = os.pipe()
    if pol is not None:
        full = [HELPER, "--policy", json.dumps(pol), "--cwd", f"{base}/cwd",
                "--status-fd", str(status_w), "--"] + argv
    else:
        full = argv
    try:
        p = subprocess.run(full, cwd=f"{base}/cwd", env=env, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=TIMEOUT, pass_fds=(status_w,))
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = None, e.stdout or b"", e.stderr or b""
    except OSError as e:
        # Only the uncontained control gets here (the helper itself always starts): mimic the
        # shell's convention so the control reads like the sandboxed run.
        code = 127 if isinstance(e, FileNotFoundError) else 126
        out, err = b"", str(e).encode()
    os.close(status_w)
    with os.fdopen(status_r, "rb") as f:
        records = [json.loads(line) for line in f.read().splitlines() if line.strip()]
    signal = None
    if code is not None and code < 0:
        signal, code = -code, None
    return code, signal, records, out, err


def scrub(value, base, port):
    text = json.dumps(value)
    text = text.replace(base, "@BASE@")
    if port:
        text = text.replace(f":{port}", ":@PORT@")
    return json.loads(text)


def local_server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def main():
    if not os.path.exists(HELPER):
        sys.exit(f"{HELPER} is missing: cargo build --release -p cordon-sandbox")
    only = set(sys.argv[1:])
    os.makedirs(OUT_DIR, exist_ok=True)
    server = local_server()
    port = server.server_address[1]
    left_out = []
    for c in CASES:
        if only and c["name"] not in only:
            continue
        tool = c["argv"][0]
        if c["need_tool"] and shutil.which(tool) is None and not tool.startswith("@"):
            left_out.append((c["name"], f"{tool} is not installed"))
            continue
        outcome = {"control": {"exit_code": None, "stderr": "(not run: it would change the machine)"}}
        for which in ("sandbox", "control") if c.get("control", True) else ("sandbox",):
            base = fresh_base()
            try:
                make_setup(base, c["setup"])
                subst = lambda s: s.replace("@BASE@", base).replace("@PORT@", str(port))
                argv = [subst(a) for a in c["argv"]]
                env = environment(base, {k: subst(v) for k, v in c["env"].items()})
                pol = policy(c["profile"], base)
                code, sig, records, out, err = run(argv, base, env, pol if which == "sandbox" else None)
                outcome[which] = scrub({
                    "policy": pol, "exit_code": code, "signal": sig, "records": records,
                    "stdout": out.decode("utf-8", "replace"), "stderr": err.decode("utf-8", "replace"),
                }, base, port)
            finally:
                # Controls may have written outside the base directory: undo the known ones.
                for probe in ("/etc/cordon-probe", "/etc/cordon-probe-dir"):
                    if os.path.isdir(probe):
                        shutil.rmtree(probe)
                    elif os.path.lexists(probe):
                        os.unlink(probe)
                subprocess.run(["chmod", "-R", "u+rwx", base], check=False)
                shutil.rmtree(base, ignore_errors=True)
        s = outcome["sandbox"]
        fixture = {
            "name": c["name"], "profile": c["profile"], "argv": c["argv"], "cwd": "@BASE@/cwd",
            "setup": c["setup"], "policy": s["policy"], "exit_code": s["exit_code"],
            "signal": s["signal"], "records": s["records"], "stdout": s["stdout"],
            "stderr": s["stderr"], "expected": c["expect"],
            "control": {"exit_code": outcome["control"]["exit_code"],
                        "stderr": outcome["control"]["stderr"][-2000:]},
        }
        with open(os.path.join(OUT_DIR, c["name"] + ".json"), "w") as f:
            json.dump(fixture, f, indent=2, ensure_ascii=False)
            f.write("\n")
        print(f"{c['name']:40} exit={s['exit_code']} control={outcome['control']['exit_code']}")
    server.shutdown()
    for name, why in left_out:
        print(f"left out {name}: {why}")


if __name__ == "__main__":
    main()
