#!/usr/bin/env python3
"""A minimal agent driving `cordon serve` over stdio, with nothing but the standard library.

It starts a server for the current directory (the workspace), runs a build, edits a file by
patch, reacts to a sandbox denial by approving exactly the grant the server shows, talks to a
Python REPL, and leaves a watcher running that it then kills.

    CORDON=target/debug/cordon python3 examples/python_agent.py

Environment: CORDON (the binary, default `cordon`), AGENT_OUTSIDE_DIR (a directory outside
the workspace the agent will be denied, then allowed, to write to; default a new one under
$HOME).
"""

import json
import os
import subprocess
import sys
import tempfile


class CordonServer:
    """One `cordon serve` process: requests go out as lines, answers come back as lines."""

    def __init__(self, *args):
        binary = os.environ.get("CORDON", "cordon")
        self.proc = subprocess.Popen(
            [binary, "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.next_id = 0

    def _send(self, message):
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def call(self, method, approve=None, **params):
        """Sends one request and waits for its answer. `approve(params) -> bool` answers the
        server's `approve` requests that arrive meanwhile."""
        self.next_id += 1
        my_id = self.next_id
        self._send({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("cordon serve exited")
            message = json.loads(line)
            if message.get("method") == "approve":
                decision = "approve" if approve and approve(message["params"]) else "deny"
                self._send({"jsonrpc": "2.0", "id": message["id"], "result": {"decision": decision}})
                continue
            if message.get("id") != my_id:
                continue
            if "error" in message:
                raise RuntimeError(message["error"]["message"])
            return message["result"]

    def close(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=30)


def main():
    outside = os.environ.get("AGENT_OUTSIDE_DIR") or tempfile.mkdtemp(dir=os.path.expanduser("~"))
    server = CordonServer()

    # 1. A build in the workspace: writes there are allowed by the default profile.
    with open("main.py", "w") as f:
        f.write("print('built')\n")
    r = server.call("exec", cmd="mkdir -p build && python3 -m py_compile main.py && cp main.py build/ && echo done")
    print("build:", r["outcome"]["kind"], r["output"].strip())

    # 1b. An edit by patch: applied inside the sandbox, answered with a diff per file.
    patch = "\n".join([
        "*** Begin Patch",
        "*** Update File: main.py",
        "@@",
        "-print('built')",
        "+print('built and patched')",
        "*** End Patch",
        "",
    ])
    r = server.call("apply_patch", patch=patch)
    changed = ", ".join(c["kind"] + " " + os.path.basename(c["path"]) for c in r["changes"])
    print("patch:", "applied" if r["applied"] else "not applied", "(" + changed + ")")

    # 2. A write outside the workspace is denied; the server asks before retrying. This agent
    # approves only grants of the one directory it means to write to.
    def approve(ask):
        print("denied write, asking:", ", ".join(ask["grant"]))
        return ask["grant"] == ["--writable " + outside]

    r = server.call("exec", approve=approve, cmd="echo report > " + os.path.join(outside, "report.txt"))
    print("retry after approval:", r["outcome"]["kind"], "(first attempt:", r["approval"]["first_outcome"]["kind"] + ")")

    # 3. A REPL: start it with stdin open, write a line, read the answer, end it.
    r = server.call("exec", argv=["python3", "-i", "-q", "-u"], stdin=True, yield_time_ms=500)
    repl = r["process_id"]
    r = server.call("write_stdin", process_id=repl, chars="print(6 * 7)\n", yield_time_ms=2000)
    output = r["output"]
    for _ in range(40):  # a slow machine may still be starting the interpreter: poll
        if "42" in output:
            break
        output += server.call("write_stdin", process_id=repl, yield_time_ms=500)["output"]
    answer = [line for line in output.splitlines() if line.strip("> ").isdigit()]
    print("repl answered:", answer[0].strip("> ") if answer else output)
    r = server.call("write_stdin", process_id=repl, chars="exit()\n", yield_time_ms=5000)
    print("repl ended:", r["outcome"]["kind"])

    # 4. A watcher keeps running while the agent does other things; then it is stopped.
    r = server.call("exec", cmd="while :; do date +%s; sleep 0.2; done", yield_time_ms=300)
    watcher = r["process_id"]
    running = [p["process_id"] for p in server.call("list")["processes"]]
    r = server.call("kill", process_id=watcher)
    print("server: still running a watcher," if watcher in running else "server: watcher missing,",
          "killed:", r["outcome"]["kind"])

    return server.close()


if __name__ == "__main__":
    sys.exit(main())
