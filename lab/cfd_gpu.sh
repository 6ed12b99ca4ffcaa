#!/usr/bin/env bash
# One GPU session for the CFD workload: GPU tests, the step benchmark with tuning scans, MMS on the GPU and
# a converged inlet run with its figure. Usage (repository root): OUT=dir bash lab/cfd_gpu.sh
set -u -o pipefail
OUT=${OUT:-/tmp/cfd_gpu}
mkdir -p "$OUT/run"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/env.txt"
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" | tee -a "$OUT/env.txt"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cfd -m gpu 2>&1 | tee "$OUT/pytest_gpu.log" | tail -5
timeout 60 python3 -m launchtune.kernels.cfd mms --sizes 64,128,256 --backend cupy --out "$OUT" 2>&1 | tail -6
timeout 120 python3 -m launchtune.kernels.cfd run --case inlet --size 1664x512 --steps ${RUN_STEPS:-15000} --backend cupy \
    --out "$OUT/run" 2>&1 | tail -3
rm -f "$OUT/run/solution.npz"
timeout 240 python3 -m benchmarks.cfd_step --size 3328x1024 --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -14
