#!/usr/bin/env bash
# Speed of the confining helper, as ratios against references measured in the same run.
#   true                        the bare process cost
#   min-helper true             ../shared/bench/min-helper.c: the least a Landlock+seccomp helper does
#   cordon-sandbox ... true     our helper with the workspace-write policy, as `cargo build
#                               --release` leaves it: statically linked (.cargo/config.toml)
#   cordon-sandbox-dynamic      the same helper linked dynamically, for comparison
# Target: cordon-sandbox within 1.15x of min-helper, on the Landlock + seccomp path: this block
# runs inside a user namespace where no further one can be made (user.max_user_namespaces = 0),
# the real "no user namespaces" condition, so the helper takes the path Docker and locked-down
# hosts get, and every row of the block is measured under the same condition.
# The namespace path (issue 8), where user namespaces exist:
#   cordon-sandbox namespaces   the same helper and policy with its namespace layer
#   bwrap                       bubblewrap with the equivalent view (user, pid, ipc namespaces,
#                               / read-only, the writable roots bound, the same carve-outs and
#                               hidden paths, a fresh /dev and /proc), in a project that has
#                               every protected entry
#   ... fresh dir               cordon in a directory with none of them (placeholders)
# Target (issue 8): the namespace path at most 0.6x bwrap's time.
# Shell snapshots (issue 4), with a private HOME whose .bashrc does ~100 ms of shell work:
#   bash -lc true               the login shell as agents run it (reads .profile -> .bashrc)
#   bash -c true                a bare shell: the reference
#   cordon-sandbox bash -c true the helper's own cost on top of it
#   memfd-launch true           the launcher that puts the snapshot in a sealed memfd at fd 8
#                               (what the runtime does in-process), exec'ing `true`
#   cordon-sandbox wrapped      `bash -lc true` rewritten to source the cached snapshot, through
#                               the launcher and the static helper: what `cordon run -- bash -lc
#                               true` executes
#   cordon run bash -lc true    end to end through the CLI (cache lookup, runtime, helper)
# Target: the wrapped command within 2x of bash -c true. These rows run on the Landlock +
# seccomp path (as the first block), so they measure what the snapshot costs, not the namespaces.
# Peers (issue 13), in the same run: bwrap with sandbox-runtime's core flags, firejail
# --noprofile --net=none, and sandbox-runtime's own CLI (srt, from npm), each next to cordon's
# namespace path and to `true`; a row whose tool cannot be installed is left out with the reason.
# Everything printed is also written to BENCHMARKS.md, with the machine and kernel named.
# The seccomp observer (issue 9), first; BENCH_ONLY=observer runs this block alone:
#   observer off / light / on   `cordon run` of three builds that create 10,000 files each
#                               (100 shells writing 100 files each, two at a time; make -j2
#                               running one cp per file; tar unpacking 1,000 directories of 10
#                               files), with the observer off, in its light scope (the default:
#                               each mkdir is a notification) and in full (CORDON_OBSERVER); in
#                               full every writing open is one too (every execve as well, where
#                               the read roots are narrower than /)
# Target: on at most 1.05x off; the default (src/evidence/mod.rs) follows the figure.
# The cost of `cordon run` itself (issue 13), before it; BENCH_ONLY=run runs this block alone:
#   helper alone                the helper `cordon run` finds, with the policy
#                               `cordon run --print-policy` prints, running `true`
#   cordon run -- true          the whole CLI in the same directory (a fresh project with a
#                               `.git` directory): start-up, profile resolution, spawn, wait
#   cordon run --print-policy   start-up and resolution alone; `cordon --version` start-up alone
# Target: cordon run within 1.25x of the helper alone.
set -euo pipefail
cd "$(dirname "$0")/.."
# .cargo/config.toml names the host's target (so that the binaries can be static), which puts
# them under target/<host tuple>/.
host=$(rustc -vV | sed -n 's/^host: //p')
release=target/$host/release

if [ -z "${CORDON_BENCH_INNER:-}" ]; then
  out=$(mktemp)
  set +e
  CORDON_BENCH_INNER=1 "$0" "$@" | tee "$out"
  status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    rm -f "$out"
    exit "$status"
  fi
  {
    echo "# Benchmarks"
    echo
    echo "Written by \`scripts/bench.sh\` on $(date -u +%Y-%m-%d). Every ratio is against a reference"
    echo "measured in the same run (hyperfine, medians of rounds of means)."
    echo
    echo "- Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))," \
      "$(free -g | awk '/Mem:/ {print $2}') GiB"
    echo "- Kernel: $(uname -sr); $(. /etc/os-release && echo "$PRETTY_NAME")"
    echo "- Landlock ABI: $("$release/cordon" doctor --json 2>/dev/null | python3 -c 'import json,sys; a=json.load(sys.stdin)["landlock_abi"]; print(a["kernel"] if isinstance(a, dict) else a)' || echo unknown)"
    echo
    echo '```'
    cat "$out"
    echo '```'
  } >BENCHMARKS.md
  rm -f "$out"
  echo "bench: wrote BENCHMARKS.md"
  exit 0
fi

if ! command -v hyperfine >/dev/null || ! command -v bwrap >/dev/null; then
  apt-get update -qq && apt-get install -y -qq hyperfine bubblewrap >/dev/null
fi
cargo build --release --quiet

# Not under /tmp: the default profile makes /tmp writable, and cordon then (rightly) neither
# trusts a snapshot cache nor startup files there, so the private HOME below must live elsewhere.
work=$(mktemp -d -p /var/tmp)
trap 'rm -rf "$work"' EXIT
min_src=../shared/bench/min-helper.c
if [ -z "${BENCH_ONLY:-}" ]; then
  [ -f "$min_src" ] || { echo "bench: $min_src not found" >&2; exit 1; }
  gcc -O2 -o "$work/min-helper" "$min_src"
fi

# The dynamic build, in a target directory of its own (RUSTFLAGS overrides the config's flags).
RUSTFLAGS="-C target-feature=-crt-static" CARGO_TARGET_DIR=$work/dynamic-build \
  cargo build --release --quiet -p cordon-sandbox --bin cordon-sandbox
cp "$work/dynamic-build/$host/release/cordon-sandbox" "$work/cordon-sandbox-dynamic"
cp "$release/cordon-sandbox" "$work/cordon-sandbox"
helper=$work/cordon-sandbox
cordon=$PWD/$release/cordon
policy=$(cd "$work" && "$cordon" run --print-policy)
true_bin=$(command -v true)
runs=${BENCH_RUNS:-300}

if [ "${BENCH_ONLY:-}" != observer ]; then
  # Where a person runs it: a project directory with a `.git`, not under /tmp.
  run_dir=$work/run-project
  mkdir -p "$run_dir/.git"
  run_policy=$(cd "$run_dir" && CORDON_HELPER=$helper "$cordon" run --print-policy)
  for round in $(seq "${BENCH_ROUNDS:-5}"); do
    (cd "$run_dir" && CORDON_HELPER=$helper hyperfine -N --warmup 30 --runs "$runs" \
      --export-json "$work/run-$round.json" \
      -n 'true' "$true_bin" \
      -n 'helper alone' "$helper --policy '$run_policy' -- $true_bin" \
      -n 'cordon run -- true' "$cordon run -- $true_bin" \
      -n 'cordon run --print-policy' "$cordon run --print-policy" \
      -n 'cordon --version' "$cordon --version" >/dev/null)
  done
  python3 - "$work" "${BENCH_ROUNDS:-5}" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
means = {}
for i in range(1, rounds + 1):
    for x in json.load(open(f"{work}/run-{i}.json"))["results"]:
        means.setdefault(x["command"], []).append(x["mean"] * 1000)
ms = {k: statistics.median(v) for k, v in means.items()}
ref = ms["helper alone"]
print(f"cordon run itself, median of {rounds} rounds of hyperfine means (a project with .git):")
for name in ["true", "helper alone", "cordon run -- true", "cordon run --print-policy", "cordon --version"]:
    print(f"  {name:28} {ms[name]:7.3f} ms  ({ms[name] / ref:5.2f}x helper alone)")
print(f"  cordon's own share: {ms['cordon run -- true'] - ref:.3f} ms, of which start-up and "
      f"resolution {ms['cordon run --print-policy'] - ms['true']:.3f} ms")
print(f"ratio cordon run / helper: {ms['cordon run -- true'] / ref:.3f} (target <= 1.25)")
PY
  [ "${BENCH_ONLY:-}" = run ] && exit 0
fi

obs=$work/observer
mkdir -p "$obs"
# On a tmpfs where we may mount one (root): creating and removing 10,000 files on this
# machine's ext4 (mounted with discard) varied threefold between runs, which hid the
# observer's cost; the file system's own work is no part of it. Removal is outside the timing.
obs_fs="the disk ($(df --output=fstype "$obs" | tail -1))"
if [ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=1g cordon-bench "$obs" 2>/dev/null; then
  obs_fs=tmpfs
  trap 'umount "$obs" 2>/dev/null; rm -rf "$work"' EXIT
fi
cat >"$obs/build.sh" <<'SH'
mkdir out
seq 100 | xargs -n1 -P2 sh -c 'for j in $(seq 100); do echo "$0 $j" > out/$0-$j.o; done'
[ "$(ls out | wc -l)" -eq 10000 ]
SH
printf 'int x;\n' >"$obs/src.c"
cat >"$obs/Makefile" <<'MK'
OBJS := $(patsubst %,out/%.o,$(shell seq 10000))
all: $(OBJS)
out/%.o: src.c | out
	cp src.c $@
out:
	mkdir -p out
MK
# An unpacked source tree: 1,000 directories of 10 files each, every directory one mkdir (the
# light scope watches those).
mkdir -p "$obs/tree-src"
(cd "$obs/tree-src" && for d in $(seq 1000); do mkdir "d$d" && for f in $(seq 10); do echo "$d $f" >"d$d/f$f"; done; done)
tar -cf "$obs/tree.tar" -C "$obs/tree-src" . && rm -rf "$obs/tree-src"
cat >"$obs/unpack.sh" <<'SH'
mkdir out && tar -xf tree.tar -C out
SH
obs_rounds=${BENCH_OBSERVER_ROUNDS:-3}
for round in $(seq "$obs_rounds"); do
  for build in "sh build.sh" "make -s -j2" "sh unpack.sh"; do
    key=$(printf %s "$build" | tr -c 'a-z0-9' '-')
    hyperfine -N --warmup 1 --runs "${BENCH_OBSERVER_RUNS:-3}" --prepare "rm -rf $obs/out" \
      --export-json "$work/obs-$round-$key.json" \
      -n "$build, observer off" "env CORDON_HELPER=self CORDON_OBSERVER=off $cordon run -C $obs -- $build" \
      -n "$build, light scope" "env CORDON_HELPER=self CORDON_OBSERVER=light $cordon run -C $obs -- $build" \
      -n "$build, observer on" "env CORDON_HELPER=self CORDON_OBSERVER=on $cordon run -C $obs -- $build" >/dev/null
  done
done
python3 - "$work" "$obs_rounds" "$obs_fs" <<'PY'
import glob, json, statistics, sys
work, rounds, fs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
means, mins = {}, {}
for path in glob.glob(f"{work}/obs-*.json"):
    for x in json.load(open(path))["results"]:
        means.setdefault(x["command"], []).append(x["mean"] * 1000)
        mins.setdefault(x["command"], []).append(x["min"] * 1000)
ms = {k: statistics.median(v) for k, v in means.items()}
best = {k: min(v) for k, v in mins.items()}
print(f"seccomp observer, three builds creating 10,000 files each on {fs}, median of {rounds} rounds of means (fastest run):")
for build, what in [("sh build.sh", "100 shells writing 100 files each, two at a time"),
                    ("make -s -j2", "make -j2 running one cp per file"),
                    ("sh unpack.sh", "tar unpacking 1,000 directories of 10 files")]:
    print(f"  {build}: {what}")
    for mode in ["observer off", "light scope", "observer on"]:
        name = f"{build}, {mode}"
        print(f"    {mode:14} {ms[name]:9.1f} ms  ({best[name]:9.1f} ms)  {ms[name] / ms[f'{build}, observer off']:.3f}x off")
    print(f"  ratio on / off: {ms[f'{build}, observer on'] / ms[f'{build}, observer off']:.3f} (target <= 1.05); "
          f"light scope (the default) / off: {ms[f'{build}, light scope'] / ms[f'{build}, observer off']:.3f}")
PY
if [ "$obs_fs" = tmpfs ]; then
  umount "$obs"
  trap 'rm -rf "$work"' EXIT
fi
[ "${BENCH_ONLY:-}" = observer ] && exit 0

# The machine is shared: run the whole comparison in several rounds and report, for each
# command, the median of its per-round means, so one noisy burst cannot decide the ratio.
rounds=${BENCH_ROUNDS:-5}
no_userns=(unshare --user --map-root-user -- sh -c \
  'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"')
for round in $(seq "$rounds"); do
  "${no_userns[@]}" hyperfine -N --warmup 50 --runs "$runs" --export-json "$work/round-$round.json" \
    -n true "$true_bin" \
    -n min-helper "$work/min-helper $true_bin" \
    -n cordon-sandbox "$helper --policy '$policy' -- $true_bin" \
    -n cordon-sandbox-dynamic "$work/cordon-sandbox-dynamic --policy '$policy' -- $true_bin" >/dev/null
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
means = {}
for i in range(1, rounds + 1):
    for x in json.load(open(f"{work}/round-{i}.json"))["results"]:
        means.setdefault(x["command"], []).append(x["mean"] * 1000)
ms = {k: statistics.median(v) for k, v in means.items()}
print(f"median of {rounds} rounds of hyperfine means:")
print(f"true            {ms['true']:7.3f} ms")
print(f"min-helper      {ms['min-helper']:7.3f} ms")
print(f"cordon-sandbox  {ms['cordon-sandbox']:7.3f} ms  (static, as cargo build --release leaves it)")
print(f"  dynamic build {ms['cordon-sandbox-dynamic']:7.3f} ms  (ratio {ms['cordon-sandbox-dynamic'] / ms['min-helper']:.3f})")
print(f"ratio cordon-sandbox / min-helper: {ms['cordon-sandbox'] / ms['min-helper']:.3f} (target <= 1.15)")
PY

# The namespace path in a project that has every protected entry of the default profile (a
# repository with editor and hook configuration), so that both tools bind the same carve-outs:
# cordon from its default policy there, bwrap from the same list (`--ro-bind` for each
# read-only entry, `--ro-bind /dev/null` or `--tmpfs` for each hidden one). The last row is
# the same helper in a directory with none of them: cordon then puts a placeholder at each
# missing entry for the run (an empty file, a directory for `.git`), which bwrap cannot do.
project=$work/project
mkdir -p "$project"/{.git,.cordon,.vscode,.idea,.devcontainer,.husky,.githooks,.claude,.codex,.cursor}
touch "$project"/{.gitmodules,.envrc,.pre-commit-config.yaml,.lefthook.yml,lefthook.yml,.mcp.json}
project_policy=$(cd "$project" && "$cordon" run --print-policy)
bwrap_carve_outs=$(python3 - "$project_policy" <<'PY'
import json, os, sys
fs = json.loads(sys.argv[1])["filesystem"]
args = []
for p in fs.get("read_only", []):
    args += ["--ro-bind", p, p]
for p in fs.get("deny_read", []):
    args += ["--tmpfs", p, "--remount-ro", p] if os.path.isdir(p) else ["--ro-bind", "/dev/null", p]
print(" ".join(args))
PY
)
for round in $(seq "$rounds"); do
  hyperfine -N --warmup 20 --runs "$runs" --export-json "$work/ns-$round.json" \
    -n min-helper "$work/min-helper $true_bin" \
    -n 'cordon-sandbox namespaces' "$helper --policy '$project_policy' -- $true_bin" \
    -n bwrap "bwrap --unshare-user --unshare-pid --unshare-ipc --die-with-parent --ro-bind / / --dev /dev --proc /proc --bind $project $project --bind /tmp /tmp $bwrap_carve_outs --chdir $project -- $true_bin" \
    -n 'cordon-sandbox namespaces, fresh dir' "$helper --policy '$policy' -- $true_bin" >/dev/null
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
means = {}
for i in range(1, rounds + 1):
    for x in json.load(open(f"{work}/ns-{i}.json"))["results"]:
        means.setdefault(x["command"], []).append(x["mean"] * 1000)
ms = {k: statistics.median(v) for k, v in means.items()}
print(f"namespace path, median of {rounds} rounds of hyperfine means:")
for name in ["min-helper", "cordon-sandbox namespaces", "bwrap", "cordon-sandbox namespaces, fresh dir"]:
    print(f"  {name:37} {ms[name]:7.3f} ms")
print(f"ratio cordon-sandbox namespaces / bwrap: {ms['cordon-sandbox namespaces'] / ms['bwrap']:.3f} (target <= 0.6)")
print(f"ratio fresh dir (placeholders) / bwrap: {ms['cordon-sandbox namespaces, fresh dir'] / ms['bwrap']:.3f}")
PY

cargo build --release --quiet -p cordon-runtime --examples

# Shell snapshots: a HOME laid out like Debian's skeleton (a login bash reads .profile, which
# sources .bashrc), whose .bashrc spends ~100 ms in a busy loop before defining a function.
home=$work/home
mkdir -p "$home"
cat >"$home/.profile" <<'SH'
if [ -n "$BASH_VERSION" ] && [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi
SH
cat >"$home/.bashrc" <<'SH'
i=0; while [ $i -lt ${BENCH_BASHRC_LOOPS:-20000} ]; do i=$((i+1)); done
greet() { echo "hello $1"; }
alias ll='ls -l'
export EDITOR=vi
SH
bash_bin=$(command -v bash)
# The exact argv `cordon run` executes, with the snapshot made (once, by a confined capture).
# The wrapper sources the snapshot from descriptor 8, a sealed memfd the runtime fills; for a
# command line hyperfine can run, a tiny C launcher does that step and execs the helper (its
# own cost is the `memfd-launch true` row).
CORDON_HELPER=$helper HOME=$home "$release"/examples/snapshot_argv --content "$work/snapshot.sh" \
  "$bash_bin" -lc true >"$work/wrapped.argv"
cat >"$work/memfd-launch.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
/* memfd-launch FILE FD PROGRAM ARGS...: FILE's bytes in a sealed memfd at FD, then exec. */
int main(int argc, char **argv) {
  if (argc < 4) return 125;
  int in = open(argv[1], O_RDONLY | O_CLOEXEC);
  int fd = memfd_create("snapshot", MFD_ALLOW_SEALING);
  char buf[65536];
  ssize_t n;
  if (in < 0 || fd < 0) return 125;
  while ((n = read(in, buf, sizeof buf)) > 0)
    if (write(fd, buf, (size_t)n) != n) return 125;
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) return 125;
  int target = atoi(argv[2]);
  if (dup2(fd, target) < 0) return 125;
  execvp(argv[3], argv + 3);
  perror("memfd-launch: execvp");
  return 127;
}
C
gcc -O2 -static -o "$work/memfd-launch" "$work/memfd-launch.c"
launch="$work/memfd-launch $work/snapshot.sh 8"
wrapped=$(python3 -c 'import shlex, sys
args = open(sys.argv[1], "rb").read().decode().split("\0")[:-1]
print(" ".join(shlex.quote(a) for a in args))' "$work/wrapped.argv")
HOME=$home $launch "$helper" --policy "$policy" --pass-fd 8 -- sh -c "$wrapped"' >/dev/null' \
  || { echo "bench: the wrapped command fails" >&2; exit 1; }
shell_runs=${BENCH_SHELL_RUNS:-20}
for round in $(seq "$rounds"); do
  HOME=$home hyperfine -N --warmup 2 --runs "$shell_runs" --export-json "$work/login-$round.json" \
    -n 'bash -lc true' "$bash_bin -lc true" >/dev/null
  HOME=$home "${no_userns[@]}" hyperfine -N --warmup 20 --runs "$runs" --export-json "$work/shell-$round.json" \
    -n 'bash -c true' "$bash_bin -c true" \
    -n 'cordon-sandbox bash -c true' "$helper --policy '$policy' -- $bash_bin -c true" \
    -n 'true' "$true_bin" \
    -n 'memfd-launch true' "$launch $true_bin" \
    -n 'cordon-sandbox wrapped' "$launch $helper --policy '$policy' --pass-fd 8 -- $wrapped" \
    -n 'cordon run bash -lc true' "$cordon run -- $bash_bin -lc true" >/dev/null
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
means = {}
for i in range(1, rounds + 1):
    for name in (f"login-{i}", f"shell-{i}"):
        for x in json.load(open(f"{work}/{name}.json"))["results"]:
            means.setdefault(x["command"], []).append(x["mean"] * 1000)
ms = {k: statistics.median(v) for k, v in means.items()}
base = ms["bash -c true"]
print(f"shell snapshots, median of {rounds} rounds (HOME with a ~100 ms .bashrc):")
for name in ["bash -lc true", "bash -c true", "cordon-sandbox bash -c true",
             "memfd-launch true", "cordon-sandbox wrapped", "cordon run bash -lc true"]:
    print(f"  {name:28} {ms[name]:8.3f} ms  ({ms[name] / base:6.2f}x bash -c true)")
launcher = ms["memfd-launch true"] - ms["true"]
net = ms["cordon-sandbox wrapped"] - launcher
print(f"  wrapped without the launcher's own {launcher:.3f} ms: {net:.3f} ms")
print(f"ratio wrapped / bash -c true: {net / base:.3f} (target <= 2)")
print(f"speed-up over bash -lc true: {ms['bash -lc true'] / net:.1f}x")
PY

# Library throughput (issue 3): execs/s of `true` at concurrency 1 and 8 through the static
# helper, and draining 1 GiB of output with peak RSS, each next to a reference from this run.
"$release"/examples/exec_bench --helper "$helper" --execs "${BENCH_EXECS:-400}" --gib 1

# Glob patterns in deny_read / read_only (issue 14): resolution cost on a 100,000-file workspace.
scripts/bench_patterns.sh "$cordon"
# Managed network (issue 10): the start-up cost of `--network proxy` (private namespace, the
# proxy's listeners handed to the parent) against `--network denied`, end to end through the
# CLI; then 1 GiB downloaded by curl from a server on the host's loopback, directly and from
# inside the sandbox through the proxy, in the same run. Target: proxied >= 0.8x direct.
for round in $(seq "$rounds"); do
  CORDON_HELPER=$helper hyperfine -N --warmup 10 --runs "${BENCH_NET_RUNS:-100}" --export-json "$work/net-$round.json" \
    -n 'cordon run --network denied -- true' "$cordon run --network denied -- $true_bin" \
    -n 'cordon run --network proxy -- true' "$cordon run --network proxy -- $true_bin" >/dev/null
done
python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
means = {}
for i in range(1, rounds + 1):
    for x in json.load(open(f"{work}/net-{i}.json"))["results"]:
        means.setdefault(x["command"], []).append(x["mean"] * 1000)
ms = {k: statistics.median(v) for k, v in means.items()}
print(f"managed network, median of {rounds} rounds of hyperfine means:")
for name in ["cordon run --network denied -- true", "cordon run --network proxy -- true"]:
    print(f"  {name:38} {ms[name]:7.3f} ms")
print(f"  proxy mode costs {ms['cordon run --network proxy -- true'] - ms['cordon run --network denied -- true']:.3f} ms more")
PY
mkdir -p "$work/served"
truncate -s 1G "$work/served/big"
python3 -c 'import http.server, functools, sys
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
h = functools.partial(Quiet, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
open(sys.argv[2], "w").write(str(s.server_address[1]))
s.serve_forever()' "$work/served" "$work/port" &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
while [ ! -s "$work/port" ]; do sleep 0.1; done
port=$(cat "$work/port")
echo "127.0.0.1 bench.test" >"$work/hosts"
direct=() proxied=()
for round in $(seq "$rounds"); do
  direct+=("$(curl -sS -o /dev/null -w '%{speed_download}' "http://127.0.0.1:$port/big")")
  proxied+=("$(CORDON_HELPER=$helper CORDON_PROXY_HOSTS=$work/hosts "$cordon" run --allow-domain "bench.test:$port" \
    -- curl -sS -o /dev/null -w '%{speed_download}' "http://bench.test:$port/big")")
done
python3 - "${direct[*]}" "${proxied[*]}" <<'PY'
import statistics, sys
direct = statistics.median(float(x) for x in sys.argv[1].split())
proxied = statistics.median(float(x) for x in sys.argv[2].split())
print("1 GiB download from the host's loopback, median of rounds:")
print(f"  direct (no sandbox)            {direct / 2**20:8.1f} MiB/s")
print(f"  through cordon's proxy         {proxied / 2**20:8.1f} MiB/s")
print(f"ratio proxied / direct: {proxied / direct:.3f} (target >= 0.8)")
PY
# Unified exec (issue 11): `echo hi` through a long-lived `cordon serve` against `cordon run`,
# and the memory of idle live processes in the server's manager. From the private work dir:
# the session directory must lie outside the default profile's writable roots (/tmp is one).
# (A directory of its own, so that the session directory under $home lies outside it.)
mkdir -p "$work/serve-cwd"
(cd "$work/serve-cwd" && HOME=$home python3 "$OLDPWD/scripts/bench_server.py" "$cordon" "${BENCH_SERVER_RUNS:-100}")

# Peers: the same `true`, confined by each tool with flags as close to cordon's default
# profile as each offers.
peer_rows=(-n true "$true_bin" -n 'cordon-sandbox namespaces' "$helper --policy '$project_policy' -- $true_bin")
peer_names=("cordon-sandbox namespaces")
peer_rows+=(-n 'bwrap (sandbox-runtime flags)' "bwrap --new-session --die-with-parent --unshare-net --unshare-pid --ro-bind / / --bind $project $project --bind /tmp /tmp --dev /dev --proc /proc --chdir $project -- $true_bin")
peer_names+=("bwrap (sandbox-runtime flags)")
if command -v firejail >/dev/null || apt-get install -y -qq firejail >/dev/null 2>&1; then
  peer_rows+=(-n 'firejail --noprofile --net=none' "firejail --quiet --noprofile --net=none $true_bin")
  peer_names+=("firejail --noprofile --net=none")
else
  echo "peers: firejail left out: apt-get install firejail failed"
fi
if ! command -v srt >/dev/null; then
  apt-get install -y -qq socat ripgrep >/dev/null 2>&1 || true
  npm install -g @anthropic-ai/sandbox-runtime >/dev/null 2>&1 || true
fi
if command -v srt >/dev/null; then
  peer_rows+=(-n 'sandbox-runtime srt' "srt $true_bin")
  peer_names+=("sandbox-runtime srt")
else
  echo "peers: sandbox-runtime left out: npm install -g @anthropic-ai/sandbox-runtime failed (needs npm and its registry)"
fi
for round in $(seq "$rounds"); do
  (cd "$project" && hyperfine -N --warmup 5 --runs "${BENCH_PEER_RUNS:-50}" --export-json "$work/peers-$round.json" "${peer_rows[@]}" >/dev/null)
done
python3 - "$work" "$rounds" "${peer_names[@]}" <<'PY'
import json, statistics, sys
work, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
means = {}
for i in range(1, rounds + 1):
    for x in json.load(open(f"{work}/peers-{i}.json"))["results"]:
        means.setdefault(x["command"], []).append(x["mean"] * 1000)
ms = {k: statistics.median(v) for k, v in means.items()}
ref = ms["cordon-sandbox namespaces"]
print(f"peers, `true` confined, median of {rounds} rounds of hyperfine means:")
print(f"  {'true':34} {ms['true']:8.3f} ms")
for name in names:
    print(f"  {name:34} {ms[name]:8.3f} ms  {ms[name] / ref:6.2f}x cordon-sandbox namespaces")
PY
