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
runs=${BENCH_RUNS:-1000}

hyperfine -N --warmup 100 --runs "$runs" --export-json "$work/helper.json" \
  -n true "$true_bin" \
  -n min-helper "$work/min-helper $true_bin" \
  -n cordon-sandbox "$helper --policy '$policy' -- $true_bin" \
  -n cordon-sandbox-dynamic "$work/cordon-sandbox-dynamic --policy '$policy' -- $true_bin" >&2

python3 - "$work/helper.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
ms = lambda k: r[k]["mean"] * 1000
print(f"true            {ms('true'):7.3f} ms")
print(f"min-helper      {ms('min-helper'):7.3f} ms")
print(f"cordon-sandbox  {ms('cordon-sandbox'):7.3f} ms  (static, as shipped)")
print(f"  dynamic build {ms('cordon-sandbox-dynamic'):7.3f} ms  (ratio {ms('cordon-sandbox-dynamic') / ms('min-helper'):.3f})")
ratio = ms('cordon-sandbox') / ms('min-helper')
print(f"ratio cordon-sandbox / min-helper: {ratio:.3f} (target <= 1.15)")
PY
