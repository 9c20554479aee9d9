#!/usr/bin/env bash
# Every test: installs what is missing, checks formatting and file sizes (no source file over 600
# lines), builds with AddressSanitizer and UndefinedBehaviorSanitizer (the `asan` preset) and runs
# the whole CTest suite (with, for each suite that reads ../shared/data, a run without it), then
# builds the optimised `release` preset too (benchmarks included), whose warnings differ, and runs
# its memory and timing figures and the Slurm suite (a real local Slurm). Between
# the two, the BSO server's wire tests (tests/python, Debian's python3) run against the `asan`
# build's `zeus`; the ones that drive the reference's own BSO and zeusd clients run only with
# ZEUS_REFERENCE_SRC set (docs/bso-compatibility.md, docs/zeusd.md). Last, the Python package's
# tests (tests/pybind) against the `release` build (an ASan-built extension cannot load into an
# uninstrumented interpreter), and the wheels built from it (scripts/wheel.sh, one per CPython
# version found) installed into venvs (tests/wheel). Then the threaded suites under
# ThreadSanitizer (the `tsan` preset builds only the tests labelled `threaded`) and every fuzz
# target for 5 seconds (scripts/fuzz.sh), as docs/testing.md describes.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
# Every preset compiles through ccache; with paths taken relative to the checkout, a fresh clone
# (CI's) reuses what any earlier build on this machine compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
./scripts/check-format.sh
./scripts/check-file-size.sh
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan -j"$(nproc)"
ZEUS_CLI="$PWD/build/asan/src/cli/zeus" PYTHONDONTWRITEBYTECODE=1 \
  ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python
cmake --preset release >/dev/null
cmake --build --preset release
# Memory and timing figures are asserted in the optimised build (tests/support/sanitizers.hpp):
# the ASan run above checks the behaviour around them and skips the figures themselves.
perf_tests='^(bso_history_test|BsoProcess\.MemoryAfterManyLargeAnswersStaysNearItsLevelBefore'
perf_tests+='|CliMonitor\.AHostileServicePrintsTheSummaryWithinTheDeadlineInBoundedMemory'
perf_tests+='|ExporterCli\.SigtermStopsItWithinFiveSecondsWhileALookupHangs|Startup\..*)$'
ctest --preset release -R "$perf_tests"
# The Slurm suite (tests/slurm/slurm_cluster_test, docs/slurm.md "Testing"): the SPANK plugin on a
# real one-node Slurm started once for the suite; built only here, where the plugin is not
# instrumented (srun and slurmstepd load it).
ctest --preset release -L slurm --output-on-failure
ZEUS_CPP_PYTHONPATH="$PWD/build/release/python" ZEUS_CLI="$PWD/build/release/src/cli/zeus" \
  PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/pybind
# The self-contained wheels from the same build (scripts/wheel.sh: one per CPython 3.10-3.13 found
# here, the release build's own Python's last), checked unpacked and each installed into a fresh
# venv of its interpreter (tests/wheel, docs/python.md "Installing the wheel", "Python versions");
# the aarch64 wheel, cross-built once (the `aarch64` preset), and the `zeus` CLI tarballs of both
# machines, run under qemu-user where they are aarch64 (docs/arm.md).
artifacts=$(./scripts/wheel.sh --cli)
wheels=$(grep '\.whl$' <<<"$artifacts" | grep -v '_aarch64\.whl$')
wheel=$(tail -n 1 <<<"$wheels")
aarch64_wheel=$(grep '_aarch64\.whl$' <<<"$artifacts" || true)
tarballs=$(grep '\.tar\.gz$' <<<"$artifacts" | sed "s|^|$PWD/|" | tr '\n' ' ')
ZEUS_WHEEL="$PWD/$wheel" ZEUS_WHEELS="$(sed "s|^|$PWD/|" <<<"$wheels" | tr '\n' ' ')" \
  ZEUS_AARCH64_WHEEL="${aarch64_wheel:+$PWD/$aarch64_wheel}" ZEUS_CLI_TARBALLS="$tarballs" \
  ZEUS_WHEEL_BUILD_DIR="$PWD/build/release" PYTHONDONTWRITEBYTECODE=1 \
  /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/wheel
cmake --preset tsan >/dev/null
cmake --build --preset tsan
# GCC 12's ThreadSanitizer cannot start with more than 28 bits of mmap randomisation.
tsan_run=()
if [ "$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 28)" -gt 28 ]; then
  tsan_run=(setarch "$(uname -m)" -R)
fi
"${tsan_run[@]}" ctest --preset tsan -j"$(nproc)"
./scripts/fuzz.sh 5
