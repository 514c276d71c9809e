#!/usr/bin/env bash
# Speed of the confining helper, as ratios against references measured in the same run.
#   true                        the bare process cost
#   min-helper true             ../shared/bench/min-helper.c: the least a Landlock+seccomp helper does
#   cordon-sandbox ... true     our helper with the workspace-write policy, built the way it is
#                               shipped: statically linked (see README, "Installing the helper")
#   cordon-sandbox-dynamic      the same helper as a plain `cargo build` leaves it, for comparison
# Target: cordon-sandbox within 1.15x of min-helper.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v hyperfine >/dev/null; then
  apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null
fi
cargo build --release --quiet

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
min_src=../shared/bench/min-helper.c
[ -f "$min_src" ] || { echo "bench: $min_src not found" >&2; exit 1; }
gcc -O2 -o "$work/min-helper" "$min_src"

cp target/release/cordon-sandbox "$work/cordon-sandbox-dynamic"
cargo rustc --release --quiet -p cordon-sandbox --bin cordon-sandbox -- -C target-feature=+crt-static
cp target/release/cordon-sandbox "$work/cordon-sandbox"
helper=$work/cordon-sandbox
cordon=$PWD/target/release/cordon
policy=$(cd "$work" && "$cordon" run --print-policy)
true_bin=$(command -v true)
runs=${BENCH_RUNS:-300}

# The machine is shared: run the whole comparison in several rounds and report, for each
# command, the median of its per-round means, so one noisy burst cannot decide the ratio.
rounds=${BENCH_ROUNDS:-5}
for round in $(seq "$rounds"); do
  hyperfine -N --warmup 50 --runs "$runs" --export-json "$work/round-$round.json" \
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
print(f"cordon-sandbox  {ms['cordon-sandbox']:7.3f} ms  (static, as shipped)")
print(f"  dynamic build {ms['cordon-sandbox-dynamic']:7.3f} ms  (ratio {ms['cordon-sandbox-dynamic'] / ms['min-helper']:.3f})")
print(f"ratio cordon-sandbox / min-helper: {ms['cordon-sandbox'] / ms['min-helper']:.3f} (target <= 1.15)")
PY

# Library throughput (issue 3): execs/s of `true` at concurrency 1 and 8 through the static
# helper, and draining 1 GiB of output with peak RSS, each next to a reference from this run.
cargo build --release --quiet -p cordon --examples
target/release/examples/exec_bench --helper "$helper" --execs "${BENCH_EXECS:-400}" --gib 1
