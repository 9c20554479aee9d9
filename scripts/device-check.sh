#!/usr/bin/env bash
# The real-NVML check for a machine with an NVIDIA GPU (the lent H200): show-env in text and
# JSON, the energy/power read-out, the power-limit set/restore round trip, and the GPU's sensor
# measured under a known load (zeus sensor-probe with scripts/gpu_load.py, about 100 s; needs
# PyTorch with CUDA): the counter's refresh period, the power sampling window, the cost of one
# energy and one power read, and counter against polled power on square waves, printed as the
# sensor parameters for that model (docs/monitor.md, "Measuring a GPU's sensor"). Prints
# everything; exits non-zero when a step fails. Uses build/release (built here, or carried).
#   scripts/device-check.sh                 run the check
#   scripts/device-check.sh --bundle DIR    copy the two programs and the shared libraries they
#                                           need (but the C library) into DIR, for a machine
#                                           without the build's packages; then run the check
#                                           there with ZEUS_BUILD_DIR=DIR
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--bundle" ]; then
  dir=${2:?--bundle needs a folder}
  set -e
  cmake --preset release >/dev/null
  cmake --build --preset release --target zeus zeus_power_limit_roundtrip >/dev/null
  mkdir -p "$dir/src/cli" "$dir/examples" "$dir/lib"
  cp build/release/src/cli/zeus "$dir/src/cli/"
  cp build/release/examples/zeus_power_limit_roundtrip "$dir/examples/"
  for lib in $(ldd build/release/src/cli/zeus build/release/examples/zeus_power_limit_roundtrip |
    awk '/=> \// {print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
  echo "device-check: bundle in $dir; run ZEUS_BUILD_DIR=$dir scripts/device-check.sh there"
  exit 0
fi
# ZEUS_BUILD_DIR: another build (CTest's device_check passes its own, --bundle makes one); it must
# hold both binaries.
build=${ZEUS_BUILD_DIR:-build/release}
if [ ! -x "$build/src/cli/zeus" ] || [ ! -x "$build/examples/zeus_power_limit_roundtrip" ]; then
  if [ -n "${ZEUS_BUILD_DIR:-}" ]; then
    echo "device-check: $build lacks src/cli/zeus or examples/zeus_power_limit_roundtrip" >&2
    exit 1
  fi
  cmake --preset release >/dev/null && cmake --build --preset release --target zeus zeus_power_limit_roundtrip || exit 1
fi
if [ -d "$build/lib" ]; then
  export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
unset ZEUS_SIMULATED_GPUS
zeus=$build/src/cli/zeus
status=0
echo "== nvidia-smi =="; nvidia-smi --query-gpu=index,name,uuid,driver_version,power.limit,power.min_limit,power.max_limit,power.draw --format=csv || true
echo "== zeus show-env =="; "$zeus" show-env || status=1
echo "== zeus show-env --json =="; "$zeus" show-env --json || status=1
echo "== CUDA_VISIBLE_DEVICES=0 =="; CUDA_VISIBLE_DEVICES=0 "$zeus" show-env --json | head -40 || status=1
echo "== power limit round trip =="; "$build/examples/zeus_power_limit_roundtrip" || status=1
echo "== after =="; nvidia-smi --query-gpu=index,power.limit --format=csv || true
echo "== sensor at idle (zeus sensor-probe, 3 s) =="; "$zeus" sensor-probe --gpu 0 --duration 3s || status=1
python=${ZEUS_DEVICE_PYTHON:-python3}
if "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  log=$(mktemp -d)
  echo "== sensor under a known load (zeus sensor-probe -- scripts/gpu_load.py, ~100 s) =="
  timeout 240 "$zeus" sensor-probe --gpu 0 --json --load-log "$log/load.csv" -- \
    "$python" scripts/gpu_load.py --out "$log/load.csv" >"$log/probe.json" || status=1
  cat "$log/probe.json"
  echo "== load log =="; cat "$log/load.csv" 2>/dev/null | head -5
  rm -rf "$log"
else
  echo "== sensor under load: skipped ($python has no PyTorch with CUDA; set ZEUS_DEVICE_PYTHON) =="
fi
exit $status
