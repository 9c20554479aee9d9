#!/usr/bin/env bash
# The main job on its embedded default: installs what the build and the demo need (not the
# test-only packages: scripts/setup.sh demo), builds the `zeus` CLI with the `demo` preset (no
# tests, PostgreSQL, zeusd, Python or MPI), and runs `zeus demo`: a recurring training job
# optimised end to end (a real `zeus bso serve` on SQLite, the BSO client, the power-limit
# optimizer, the monitor) on simulated GPUs in virtual time, no GPU needed. Then, briefly, the
# measurement side: `zeus show-env` and `zeus monitor` on simulated H200s.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh demo
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
cmake --preset demo >/dev/null
cmake --build --preset demo
zeus=./build/demo/src/cli/zeus
echo "== zeus demo (batch-size server + power-limit optimizer, simulated V100, virtual time) =="
"$zeus" demo
echo
export ZEUS_SIMULATED_GPUS="${ZEUS_SIMULATED_GPUS:-4:h200}"
echo "== zeus show-env (ZEUS_SIMULATED_GPUS=$ZEUS_SIMULATED_GPUS) =="
"$zeus" show-env
echo
echo "== zeus monitor -- sleep 1 =="
"$zeus" monitor -- sleep 1
