# Sourced by the *_gpu.sh benchmarks at the start of a call on the lent GPU machine, from the repository root with
# $OUT set: installs the wheels in .whl (dask, distributed, skops...: the machine has no package registry) into
# /tmp/site where there are any, puts /tmp/site and the repository on PYTHONPATH, and records the card:
# $OUT/nvidia-smi.txt (name, driver, clocks, temperature, power) and $OUT/device.json (launchtune.kernels.device's facts
# plus the Python and CuPy versions and the CPU count).
mkdir -p "$OUT"
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
