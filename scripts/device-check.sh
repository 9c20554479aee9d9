#!/usr/bin/env bash
# The real-NVML check for a machine with an NVIDIA GPU (the lent H200): show-env in text and
# JSON, the energy/power read-out and the power-limit set/restore round trip. Prints everything;
# exits non-zero when a step fails. Uses build/release (built here, or carried to the machine).
set -uo pipefail
cd "$(dirname "$0")/.."
# ZEUS_BUILD_DIR: another build (CTest's device_check passes its own); it must hold both binaries.
build=${ZEUS_BUILD_DIR:-build/release}
if [ ! -x "$build/src/cli/zeus" ] || [ ! -x "$build/examples/zeus_power_limit_roundtrip" ]; then
  if [ -n "${ZEUS_BUILD_DIR:-}" ]; then
    echo "device-check: $build lacks src/cli/zeus or examples/zeus_power_limit_roundtrip" >&2
    exit 1
  fi
  cmake --preset release >/dev/null && cmake --build --preset release --target zeus zeus_power_limit_roundtrip || exit 1
fi
unset ZEUS_SIMULATED_GPUS
status=0
echo "== nvidia-smi =="; nvidia-smi --query-gpu=index,name,uuid,power.limit,power.min_limit,power.max_limit,power.draw --format=csv || true
echo "== zeus show-env =="; "$build/src/cli/zeus" show-env || status=1
echo "== zeus show-env --json =="; "$build/src/cli/zeus" show-env --json || status=1
echo "== CUDA_VISIBLE_DEVICES=0 =="; CUDA_VISIBLE_DEVICES=0 "$build/src/cli/zeus" show-env --json | head -40 || status=1
echo "== power limit round trip =="; "$build/examples/zeus_power_limit_roundtrip" || status=1
echo "== after =="; nvidia-smi --query-gpu=index,power.limit --format=csv || true
exit $status
