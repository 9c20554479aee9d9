#!/usr/bin/env bash
# The main job on its embedded default: installs what is missing, builds (release), and runs
# zeus on simulated GPUs (no GPU needed): `zeus show-env`, then `zeus monitor` around a command.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target zeus
export ZEUS_SIMULATED_GPUS="${ZEUS_SIMULATED_GPUS:-4:h200}"
echo "== zeus show-env (ZEUS_SIMULATED_GPUS=$ZEUS_SIMULATED_GPUS) =="
./build/release/src/cli/zeus show-env
echo
echo "== zeus monitor -- sleep 2 =="
./build/release/src/cli/zeus monitor -- sleep 2
echo
echo "== zeus sim (built-in workload models, V100, 10 seeds) =="
./build/release/src/cli/zeus sim --gpu v100 --seeds 1-10
