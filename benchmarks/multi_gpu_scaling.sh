#!/usr/bin/env bash
# Issue 9 on a host with 2 GPUs (nvidia-h200-x2): the same CFD sweep (cluster_configs/sweeps/multi_gpu_scaling.yaml) on 1
# card and then on both, samples per second of each, the scaling efficiency, each card's throughput, and the two
# cards' timings of the same 200 configurations; a table last. Fits one 10-minute command (steps under a
# 530 s deadline; about 7 minutes expected). Everything lands in $OUT: run.log, scaling.json, agreement.csv,
# device.json, nvidia-smi.txt, sweeps.tar.gz (the sweep folders without models).
# Run from the repository root, with .venv built (any make target) or the wheels of dask/distributed/skops in .whl.
# CPU=1 runs the same steps with the numpy backend on a small grid and CPU workers as the cards (no GPU needed);
# PY picks the interpreter (default .venv/bin/python, else python3); the wheels in .whl are installed only when
# it lacks dask (NO_WHEELS=1 never installs them).
# The multicast switches (NCCL_NVLS_ENABLE=0 and the others the device README names) are left as found.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the project's .venv where one exists (any make target builds it), else python3 plus the wheels in .whl
if [ -x .venv/bin/python ]; then PY=${PY:-.venv/bin/python}; else PY=${PY:-python3}; fi
CARDS=${CARDS:-2}
if [ -z "${NO_WHEELS:-}" ] && ! $PY -c 'import dask, distributed' 2>/dev/null; then
  if ! compgen -G ".whl/*.whl" > /dev/null; then
    echo "error: $PY lacks dask/distributed and .whl/ holds no wheels: run 'make pytest' once (builds .venv)" \
      "or put the wheels in .whl/" >&2
    exit 2
  fi
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
ARGS=(--cards "$CARDS" --out "$OUT" --budget-s "${BUDGET_S:-530}")
if [ -n "${CPU:-}" ]; then
  ARGS+=(--cpu --agree "${AGREE:-12}")
else
  ARGS+=(--agree "${AGREE:-200}")
  { nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
      --format=csv; nvidia-smi topo -m; } > "$OUT/nvidia-smi.txt" 2>&1
  $PY - "$CARDS" > "$OUT/device.json" <<'PY' || { cat "$OUT/device.json"; exit 3; }
import json, platform, sys
import cupy
n = cupy.cuda.runtime.getDeviceCount()
cards = []
for i in range(n):
    p = cupy.cuda.runtime.getDeviceProperties(i)
    cards.append({"index": i, "name": p["name"].decode(), "pci_bus_id": cupy.cuda.Device(i).pci_bus_id,
                  "sm_count": p["multiProcessorCount"], "memory_gb": round(p["totalGlobalMem"] / 1e9, 1)})
print(json.dumps({"python": platform.python_version(), "cupy": cupy.__version__,
                  "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
                  "cuda_driver": cupy.cuda.runtime.driverGetVersion(), "cards": cards}, indent=1))
if n < int(sys.argv[1]):
    sys.exit(f"need {sys.argv[1]} GPUs, CuPy sees {n}")
PY
fi
date -u +"start %Y-%m-%dT%H:%M:%SZ" | tee "$OUT/run.log"
$PY -m benchmarks.multi_gpu_scaling "${ARGS[@]}" 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" >> "$OUT/run.log"  # the table stays the last thing printed
if [ -z "${CPU:-}" ]; then
  nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv >> "$OUT/nvidia-smi.txt" 2>&1
fi
tar -C /tmp/multi_gpu_scaling --exclude '.dask*' --exclude models -czf "$OUT/sweeps.tar.gz" . 2>/dev/null
exit $status
