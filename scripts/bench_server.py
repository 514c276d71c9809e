#!/usr/bin/env python3
"""Unified exec (issue 11): starting a process and reading its first output through
`cordon serve`, against `cordon run` for the same command, and the memory an idle live
process costs in the server's process manager.

    python3 scripts/bench_server.py CORDON_BINARY [RUNS]

Run from a directory outside /tmp (the default profile makes /tmp writable, and the session
directory must not be). Both paths run the same argv (`echo hi`, no shell snapshot involved)
under the same default profile; the server is started once, as an agent would keep it.
"""

import json
import os
import statistics
import subprocess
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def descendants(pid):
    children = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            children.append(int(entry))
    out = []
    for child in children:
        out.append(child)
        out.extend(descendants(child))
    return out


def main():
    cordon = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    server = subprocess.Popen([cordon, "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    next_id = [0]

    def call(method, **params):
        next_id[0] += 1
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": next_id[0], "method": method, "params": params}) + "\n")
        server.stdin.flush()
        while True:
            message = json.loads(server.stdout.readline())
            if message.get("id") == next_id[0]:
                return message["result"]

    for _ in range(10):
        call("exec", argv=["echo", "hi"])
    rounds = 5
    served, ran = [], []
    for _ in range(rounds):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            r = call("exec", argv=["echo", "hi"])
            times.append(time.perf_counter() - start)
            assert r["output"] == "hi\n", r
        served.append(statistics.mean(times) * 1000)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            out = subprocess.run([cordon, "run", "--", "echo", "hi"], stdout=subprocess.PIPE, check=True).stdout
            times.append(time.perf_counter() - start)
            assert out == b"hi\n", out
        ran.append(statistics.mean(times) * 1000)
    s, c = statistics.median(served), statistics.median(ran)
    print(f"first output of `echo hi`, median of {rounds} rounds of {runs}:")
    print(f"  cordon serve exec           {s:7.3f} ms")
    print(f"  cordon run                  {c:7.3f} ms")
    print(f"ratio serve / run: {s / c:.3f} (target <= 1.2)")

    # Memory per idle live process: the server's own growth, and the processes that keep each
    # sandboxed command (helper monitor, init, the command itself).
    count = 32
    before = rss_kib(server.pid)
    ids = [call("exec", argv=["sleep", "600"], stdin=True, yield_time_ms=0)["process_id"] for _ in range(count)]
    time.sleep(1.0)
    after = rss_kib(server.pid)
    tree = descendants(server.pid)
    tree_rss = sum(rss_kib(p) for p in tree if os.path.exists(f"/proc/{p}"))
    print(f"idle live processes: {count} `sleep 600` with stdin open")
    print(f"  server RSS growth per process     {(after - before) / count:7.1f} KiB")
    print(f"  sandbox processes RSS per process {tree_rss / count:7.1f} KiB ({len(tree) / count:.0f} processes each; shared pages counted in each)")
    for pid in ids:
        call("kill", process_id=pid)
    server.stdin.close()
    server.wait(timeout=30)


if __name__ == "__main__":
    main()
