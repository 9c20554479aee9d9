#!/usr/bin/env bash
# The main job on its embedded default: installs what is missing, builds (release), and runs
# `zeus demo`: a recurring training job optimised end to end (a real `zeus bso serve` on SQLite,
# the BSO client, the power-limit optimizer, the monitor) on simulated GPUs in virtual time, no GPU
# needed. Then, briefly, the measurement side: `zeus show-env` and `zeus monitor` on simulated H200s.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target zeus
echo "== zeus demo (batch-size server + power-limit optimizer, simulated V100, virtual time) =="
./build/release/src/cli/zeus demo
echo
export ZEUS_SIMULATED_GPUS="${ZEUS_SIMULATED_GPUS:-4:h200}"
echo "== zeus show-env (ZEUS_SIMULATED_GPUS=$ZEUS_SIMULATED_GPUS) =="
./build/release/src/cli/zeus show-env
echo
echo "== zeus monitor -- sleep 1 =="
./build/release/src/cli/zeus monitor -- sleep 1
