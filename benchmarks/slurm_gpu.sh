#!/usr/bin/env bash
# Issue 19 on a host with 2 GPUs and no package registry (nvidia-h200-x2): a single-node SLURM from carried
# .deb files (.slurm-debs: fetched here with `python -m tests.slurm.debs download .slurm-debs` when missing and
# apt-get works; on a host without a package registry, make them where apt-get works and copy the folder),
# its GRES the real /dev/nvidia0 and /dev/nvidia1, then the CFD sweep through --cluster with one job per GPU,
# a job cancelled mid-sweep, every row checked against the GPU SLURM gave its job, and the local cluster on
# the same spec for the throughput; a table last. Fits one 10-minute command (budget BUDGET_S, default 380).
# Everything lands in $OUT: run.log, slurm_gpu.json, jobs.csv, slurm-logs.tar.gz, sweeps.tar.gz, device.json,
# nvidia-smi.txt. Run as root from the repository root. PY picks the interpreter (default .venv/bin/python,
# which any make target builds, else python3); the wheels of dask/distributed/dask-jobqueue/skops in .whl are
# installed only when it lacks them (NO_WHEELS=1 never installs them). CPU=1 rehearses it without a GPU
# (numpy, fake GPU device nodes). The multicast switches
# (NCCL_NVLS_ENABLE=0 and the others the device README names) are left as found.
# Dry run: none (two cards of one host, as root; CPU=1 above rehearses it without a GPU)
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# the project's .venv where one exists, else python3 plus the wheels in .whl
if [ -x .venv/bin/python ]; then PY=${PY:-.venv/bin/python}; else PY=${PY:-python3}; fi
if ! compgen -G ".slurm-debs/*.deb" > /dev/null; then
  if command -v apt-get > /dev/null; then
    echo "fetching SLURM's .deb files into .slurm-debs/ (apt-get download)"
    PYTHONPATH=$PWD $PY -m tests.slurm.debs download .slurm-debs || exit 1
  else
    echo "error: .slurm-debs/ holds no .deb files and apt-get is missing: run" \
      "'python -m tests.slurm.debs download .slurm-debs' where apt-get works and copy the folder here" >&2
    exit 2
  fi
fi
if [ -z "${NO_WHEELS:-}" ] && ! $PY -c 'import dask, distributed, dask_jobqueue, skops' 2>/dev/null; then
  if ! compgen -G ".whl/*.whl" > /dev/null; then
    echo "error: $PY lacks dask/distributed/dask-jobqueue/skops and .whl/ holds no wheels: run 'make venv'" \
      "once (builds .venv) or put the wheels in .whl/" >&2
    exit 2
  fi
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1
ARGS=(--out "$OUT" --budget-s "${BUDGET_S:-380}" --work /tmp/slurm_gpu)
[ -n "${SAMPLES:-}" ] && ARGS+=(--samples "$SAMPLES")
[ -z "${NO_LOCAL:-}" ] && ARGS+=(--local)
if [ -n "${CPU:-}" ]; then
  ARGS+=(--cpu)
else
  { nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version,clocks.sm,temperature.gpu,power.draw \
      --format=csv; nvidia-smi topo -m; ls -l /dev/nvidia*; } > "$OUT/nvidia-smi.txt" 2>&1
  $PY - > "$OUT/device.json" <<'PY'
import json, os, platform
import cupy
cards = [{"index": i, "name": cupy.cuda.runtime.getDeviceProperties(i)["name"].decode(),
          "pci_bus_id": cupy.cuda.Device(i).pci_bus_id} for i in range(cupy.cuda.runtime.getDeviceCount())]
print(json.dumps({"python": platform.python_version(), "cupy": cupy.__version__,
                  "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
                  "cuda_driver": cupy.cuda.runtime.driverGetVersion(), "glibc": platform.libc_ver()[1],
                  "os": platform.freedesktop_os_release().get("PRETTY_NAME"), "cpus": os.cpu_count(),
                  "cards": cards}, indent=1))
PY
fi
date -u +"start %Y-%m-%dT%H:%M:%SZ" | tee "$OUT/run.log"
$PY -m benchmarks.slurm_gpu "${ARGS[@]}" 2>&1 | grep --line-buffered -v ' - distributed\.' | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" >> "$OUT/run.log"
tar -C /tmp/slurm_gpu --exclude '.dask*' --exclude models --exclude prefix --exclude slurm \
  -czf "$OUT/sweeps.tar.gz" sweep local 2>/dev/null
exit $status
