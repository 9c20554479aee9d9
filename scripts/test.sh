#!/usr/bin/env bash
# Every test: installs what is missing, checks formatting, builds with AddressSanitizer and
# UndefinedBehaviorSanitizer (the `asan` preset) and runs the whole CTest suite, then builds the
# optimised `release` preset too (benchmarks included), whose warnings differ.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/check-format.sh
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j"$(nproc)"
cmake --preset release >/dev/null
cmake --build --preset release
