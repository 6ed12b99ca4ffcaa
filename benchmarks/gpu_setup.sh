# Sourced by the *_gpu.sh benchmarks at the start of a call on the lent GPU machine, from the repository root with
# $OUT set: installs the wheels in .whl (dask, distributed, skops...: the machine has no package registry) into
# /tmp/site where there are any, puts /tmp/site and the repository on PYTHONPATH, and records the card:
# $OUT/nvidia-smi.txt (name, driver, clocks, temperature, power) and $OUT/device.json (launchtune.kernels.device's facts
# plus the Python and CuPy versions and the CPU count).
# Sets SCRATCH (${TMPDIR:-/tmp}: where a script keeps its work folders) and DRY: with DRY_RUN=1 (no GPU needed),
# DRY is --dry-run, which each script passes to its Python steps (they check what they would build and stop)
# and nothing is installed or recorded here; without DRY_RUN, DRY is empty.
mkdir -p "$OUT"
SCRATCH=${TMPDIR:-/tmp}
if [ -n "${DRY_RUN:-}" ]; then
  DRY=--dry-run
  export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
  echo "dry run: no GPU used; each step checks what it would build and stops"
  return 0
fi
DRY=
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  > "$OUT/nvidia-smi.txt" 2>&1
python3 - > "$OUT/device.json" <<'PY'
import json, os, platform, cupy
from launchtune.kernels.backend import get_backend
from launchtune.kernels.device import describe_device
facts = describe_device(get_backend("cupy"))
facts.update(python=platform.python_version(), cupy=cupy.__version__, cpus=len(os.sched_getaffinity(0)))
print(json.dumps(facts, indent=1))
PY
