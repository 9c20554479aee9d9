#!/usr/bin/env bash
# Installs the Debian 12 packages zeus-cpp needs for one purpose, only those that are missing.
#   scripts/setup.sh [--dry-run] [demo|test]
#   demo  what scripts/demo.sh needs: the compiler, CMake and the libraries the `zeus` CLI links
#         (the `demo` preset: no tests, no PostgreSQL, no zeusd, no Python, no MPI)
#   test  (the default) everything scripts/test.sh runs: the demo's packages plus the test-only
#         ones (GoogleTest, Google Benchmark, clang-14 for the fuzzers, MPI, PostgreSQL, Python
#         with pybind11 and torch, a real Prometheus, headless Chromium, Slurm, and the aarch64
#         cross toolchain with arm64 libraries and qemu-user)
# --dry-run prints what is missing and installs nothing. README.md, "Dependencies", says why each
# package is here.
set -euo pipefail

dry_run=0
purpose=test
for argument in "$@"; do
  case "$argument" in
    --dry-run) dry_run=1 ;;
    demo | test) purpose=$argument ;;
    *)
      echo "usage: scripts/setup.sh [--dry-run] [demo|test]" >&2
      exit 2
      ;;
  esac
done

# The build of the libraries and the `zeus` CLI (and so the demo): cpp-httplib, SQLite and
# OpenSSL for the BSO client and server, Boost.Beast/Asio and zlib for the HTTP host, Chart.js
# for `zeus report`.
demo_packages=(
  cmake ninja-build g++ pkg-config ccache
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libcpp-httplib-dev libsqlite3-dev libssl-dev libboost1.81-dev zlib1g-dev libjs-chart.js
)
# Only the test command needs these.
test_packages=(
  clang-format clang-14 libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin
  libtomlplusplus-dev
  postgresql libpq-dev
  python3-httpx python3-pydantic python3-pytest
  pybind11-dev python3-pybind11 python3-numpy python3-torch python3-pip python3-venv patchelf
  prometheus prometheus-pushgateway chromium
  slurmctld slurmd slurm-client munge libslurm-dev
)
# The aarch64 wheel and CLI tarball (docs/arm.md): Debian's cross toolchain, the arm64 multiarch
# -dev packages of what the CLI and the extension link (beside the host's, under
# /usr/lib/aarch64-linux-gnu), and user-mode emulation for their smoke test. The arm64 interpreter
# itself cannot be installed beside the host's; scripts/aarch64-python unpacks it instead.
cross_packages=(
  crossbuild-essential-arm64 qemu-user
  libfmt-dev:arm64 libspdlog-dev:arm64 libcpp-httplib-dev:arm64 libsqlite3-dev:arm64
  libssl-dev:arm64 zlib1g-dev:arm64 libboost1.81-dev:arm64 libpython3.11-dev:arm64
  libblas3:arm64 liblapack3:arm64
)
packages=("${demo_packages[@]}")
if [ "$purpose" = test ]; then
  packages+=("${test_packages[@]}" "${cross_packages[@]}")
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup ($purpose): all ${#packages[@]} packages are installed"
  exit 0
fi
if [ "$dry_run" -eq 1 ]; then
  echo "setup ($purpose): would install ${missing[*]}"
  exit 0
fi

echo "setup ($purpose): installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
# The arm64 packages come from the same archive once dpkg knows the architecture.
if printf '%s\n' "${missing[@]}" | grep -q ':arm64$' &&
  ! dpkg --print-foreign-architectures | grep -qx arm64; then
  "${sudo_cmd[@]}" dpkg --add-architecture arm64
fi
"${sudo_cmd[@]}" apt-get update -qq
# --no-remove: never make room by removing what is installed (an arm64 package that conflicts
# with the host's, such as python3.11-minimal:arm64, would take the host's python3 with it).
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends --no-remove "${missing[@]}"
