#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 60) on this machine's stable toolchain
# (`-s none`: coverage-guided, without a sanitizer, which needs nightly), starting from the
# committed corpus and seeds. New coverage is merged into fuzz/corpus/<target> and minimised,
# so that the corpus stays small enough to commit; a crash stops the script with its input in
# fuzz/artifacts/<target> and a non-zero exit.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
cargo fuzz build -s none
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in "${targets[@]}"; do
  corpus=fuzz/corpus/$target
  mkdir -p "$corpus"
  seeds=()
  [ -d "fuzz/seeds/$target" ] && seeds=("fuzz/seeds/$target")
  echo "fuzz: $target for ${seconds}s"
  if ! cargo fuzz run -s none "$target" "$corpus" "${seeds[@]}" -- \
    -max_total_time="$seconds" >"$log" 2>&1; then
    tail -40 "$log" >&2
    echo "fuzz: $target failed; the input is in fuzz/artifacts/$target" >&2
    exit 1
  fi
  grep -E '^#[0-9]+[[:space:]]+DONE' "$log" || true
  cargo fuzz cmin -s none "$target" "$corpus" >/dev/null 2>&1 || true
done
