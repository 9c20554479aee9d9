#!/usr/bin/env bash
# Installs the Debian 12 packages zeus-cpp needs, only those that are missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config clang-format clang-14 libclang-rt-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libopenmpi-dev openmpi-bin
  postgresql libpq-dev
  libcpp-httplib-dev libsqlite3-dev libssl-dev libboost1.81-dev zlib1g-dev ccache
  python3-httpx python3-pydantic python3-pytest
  pybind11-dev python3-pybind11 python3-numpy python3-torch python3-pip
  prometheus chromium libjs-chart.js
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
