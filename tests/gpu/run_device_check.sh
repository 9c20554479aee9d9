#!/usr/bin/env bash
# CTest's device_check (label `gpu`): scripts/device-check.sh against this build's binaries when
# an NVIDIA GPU is present, otherwise skipped with exit code 77 (SKIP_RETURN_CODE) and a line
# that says why. A GPU is present when nvidia-smi lists one or, without nvidia-smi, when
# libnvidia-ml.so.1 loads and counts at least one device.
# Usage: run_device_check.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: run_device_check.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)

gpu_count() {
  local listed
  if listed=$(nvidia-smi -L 2>/dev/null); then
    grep -c '^GPU ' <<<"$listed"
    return
  fi
  /usr/bin/python3 - <<'PY' 2>/dev/null || echo 0
import ctypes
nvml = ctypes.CDLL("libnvidia-ml.so.1")
count = ctypes.c_uint(0)
ok = nvml.nvmlInit_v2() == 0 and nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0
print(count.value if ok else 0)
PY
}

count=$(gpu_count)
if [ "${count:-0}" -lt 1 ]; then
  echo "device_check: SKIPPED: no NVIDIA GPU on this machine (nvidia-smi lists none and" \
       "libnvidia-ml.so.1 does not load or counts no device); run it where a GPU is"
  exit 77
fi
echo "device_check: $count NVIDIA GPU(s); running scripts/device-check.sh on $build"
ZEUS_BUILD_DIR=$build exec "$here/../../scripts/device-check.sh"
