#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` preset: clang-14, ASan+UBSan; build/fuzz) and runs each
# for SECONDS (default 60): first it replays fuzz/regressions/<target>/ (inputs that once crashed),
# then it fuzzes from fuzz/corpus/<target>/ in a scratch copy, so that nothing is written into the
# repository. Fails on any crash, leak, timeout or broken invariant, and says where the input is.
# docs/testing.md.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]     (targets: the names under fuzz/corpus/)
# ZEUS_FUZZ_WORK=DIR keeps the scratch corpora and crash inputs in DIR (default: a new temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
shift $(($# > 0 ? 1 : 0))
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(find fuzz/corpus -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
fi
if ! command -v clang++-14 >/dev/null; then
  echo "fuzz: clang++-14 not found; run scripts/setup.sh (clang-14, libclang-rt-14-dev)" >&2
  exit 1
fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz

work=${ZEUS_FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/zeus-fuzz.XXXXXX")}
mkdir -p "$work"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
failed=()

for target in "${targets[@]}"; do
  binary="build/fuzz/fuzz/fuzz_$target"
  if [ ! -x "$binary" ] || [ ! -d "fuzz/corpus/$target" ]; then
    echo "fuzz: no target '$target' (fuzz/corpus/$target and $binary)" >&2
    failed+=("$target")
    continue
  fi
  rm -rf "${work:?}/$target"
  mkdir -p "$work/$target/corpus" "$work/$target/crashes"
  log="$work/$target/log"

  # Past crashes: each must now pass.
  mapfile -t regressions < <(find "fuzz/regressions/$target" -type f ! -name '*.md' 2>/dev/null | sort)
  if [ ${#regressions[@]} -gt 0 ]; then
    if ! "$binary" -runs=1 "${regressions[@]}" >"$work/$target/regressions.log" 2>&1; then
      tail -n 40 "$work/$target/regressions.log" >&2
      echo "fuzz: $target: a regression input crashes again (fuzz/regressions/$target/;" \
        "full log: $work/$target/regressions.log)" >&2
      failed+=("$target")
      continue
    fi
  fi

  cp -r "fuzz/corpus/$target/." "$work/$target/corpus/"
  start=$(date +%s)
  if "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/$target/crashes/" "$work/$target/corpus" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $target: ${runs:-?} runs in $(($(date +%s) - start)) s," \
      "${#regressions[@]} regression input(s) replayed, no crash"
  else
    tail -n 60 "$log" >&2
    echo "fuzz: $target FAILED (full log: $log). The input:" >&2
    find "$work/$target/crashes" -type f -printf '  %p\n' >&2
    echo "  replay: $binary <input>; keep it as a regression test:" \
      "cp <input> fuzz/regressions/$target/" >&2
    failed+=("$target")
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (scratch directory: $work)" >&2
  exit 1
fi
if [ -z "${ZEUS_FUZZ_WORK:-}" ]; then
  rm -rf "$work"
fi
echo "fuzz: ${#targets[@]} targets, $seconds s each, no crash"
