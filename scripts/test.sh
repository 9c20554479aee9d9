#!/usr/bin/env bash
# Every test: installs what is missing, checks formatting, builds with AddressSanitizer and
# UndefinedBehaviorSanitizer (the `asan` preset), and runs the whole CTest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/check-format.sh
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j"$(nproc)"
