#!/usr/bin/env bash
# What glob patterns in deny_read / read_only cost at resolution (issue 14): `cordon run
# --print-policy` (everything up to the helper) in a workspace of 100,000 files, without a
# pattern, with two patterns on names (`**/.env`, `**/*.pem`: one parallel walk of the whole
# tree), and with a pattern on a literal directory (`secrets/**`: carved whole, nothing walked).
# Warm page cache (each row warms up first). Usage: scripts/bench_patterns.sh [CORDON_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null; }
cordon=${1:-}
if [ -z "$cordon" ]; then
  cargo build --release --quiet -p cordon-runtime --bin cordon
  cordon=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release/cordon
fi
# Not under /tmp, which the default profile makes writable (its patterns would walk it too).
work=$(mktemp -d -p /var/tmp)
trap 'rm -rf "$work"' EXIT
ws=$work/ws
python3 - "$ws" <<'PY'
import os, sys
ws = sys.argv[1]
for top in range(100):
    for sub in range(10):
        d = os.path.join(ws, f"pkg{top}", f"mod{sub}")
        os.makedirs(d)
        for f in range(100):
            open(os.path.join(d, f"f{f}.txt"), "w").close()
for i in range(50):
    open(os.path.join(ws, f"pkg{i}", ".env"), "w").close()
    open(os.path.join(ws, f"pkg{i}", "mod0", "key.pem"), "w").close()
os.makedirs(os.path.join(ws, "secrets"))
PY
files=$(find "$ws" -type f | wc -l)
echo "workspace: $files files in $(find "$ws" -type d | wc -l) directories"
cd "$ws"
runs=${BENCH_RUNS:-20}
hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/patterns.json" \
  -n 'no pattern' "$cordon run --print-policy" \
  -n '**/.env + **/*.pem' "$cordon run --print-policy --deny-read :cwd/**/.env --read-only :cwd/**/*.pem" \
  -n 'secrets/**' "$cordon run --print-policy --deny-read :cwd/secrets/**" >/dev/null
matched=$("$cordon" run --print-policy --deny-read ':cwd/**/.env' --read-only ':cwd/**/*.pem' \
  | python3 -c 'import json,sys; p=json.load(sys.stdin)["filesystem"]["patterns"]; print(sum(len(x["matched"]) for x in p))')
python3 - "$work/patterns.json" "$matched" <<'PY'
import json, sys
results = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = results["no pattern"]["mean"] * 1000
print(f"cordon run --print-policy over the workspace (mean of hyperfine runs):")
for name, r in results.items():
    mean, sd = r["mean"] * 1000, r["stddev"] * 1000
    print(f"  {name:22} {mean:8.2f} ms ± {sd:5.2f}  (+{mean - base:7.2f} ms)")
print(f"  the two name patterns matched {sys.argv[2]} paths")
PY
