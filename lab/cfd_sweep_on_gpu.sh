#!/usr/bin/env bash
# The paper-sized CFD sweep (cluster_configs/sweeps/cfd_inlet_paper.yaml) through the real CLI on one lent GPU,
# measuring for MINUTES (default 5) so the whole call fits a 10-minute command, then merge, train, re-measure,
# report. SPEC picks another sweep file; the sweep folder is /tmp/<spec name>. Everything lands in $OUT: run.log, device.json, nvidia-smi.txt, sweep.tar.gz (the sweep folder).
# Run from the repository root, with the wheels of dask/distributed/skops in .whl (see the working agreement).
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  > "$OUT/nvidia-smi.txt" 2>&1
python3 - > "$OUT/device.json" <<'PY'
import json, platform, cupy
from launchtune.kernels.backend import get_backend
from launchtune.kernels.device import describe_device
facts = describe_device(get_backend("cupy"))
facts.update(python=platform.python_version(), cupy=cupy.__version__)
print(json.dumps(facts, indent=1))
PY
# Pre-flight (seconds): the CUDA path must agree with the default configuration before minutes are spent.
python3 - <<'PY' 2>&1 | tee "$OUT/preflight.log" || exit 3
import time
from launchtune.kernels.cfd.workload import make_workload
t = time.perf_counter()
w = make_workload("inlet", "3328x1024", "cupy", space="paper")
print(f"build {time.perf_counter() - t:.1f} s")
space = w.space()
for c in [space.default] + space.sample(3, 123):
    t = time.perf_counter(); ok = w.check(c); t1 = time.perf_counter(); r = w.run(c, 3); t2 = time.perf_counter()
    print(f"check {ok.ok} {ok.reason[:80]} ({t1 - t:.2f} s)  run total {r.total:.3f} ms/step ({t2 - t1:.2f} s)")
    assert ok.ok, "CUDA result differs from the default configuration's"
PY
SPEC=${SPEC:-cluster_configs/sweeps/cfd_inlet_paper.yaml}
SWEEP=/tmp/$(basename "$SPEC" .yaml)
date -u +"start %Y-%m-%dT%H:%M:%SZ" | tee "$OUT/run.log"
timeout "${SWEEP_LIMIT_S:-500}" python3 -m launchtune sweep "$SPEC" \
  --out "$SWEEP" --max-minutes "${MINUTES:-5}" 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" | tee -a "$OUT/run.log"
tar -C "$(dirname $SWEEP)" --exclude .dask -czf "$OUT/sweep.tar.gz" "$(basename $SWEEP)"
cp "$SWEEP/report.md" "$OUT/" 2>/dev/null
python3 - "$SWEEP" <<'PY'
import json, sys
d = sys.argv[1]
t = json.load(open(f"{d}/timing.json"))
r = json.load(open(f"{d}/report.json"))
print(f"\nsamples measured {t['rows']} (ok {t['ok']}) in {t['seconds']} s: {t['samples_per_minute']} per minute; "
      f"10,000 samples would take {10000 / t['samples_per_minute']:.1f} min")
for cls, c in r["classes"].items():
    print(cls, {k: c.get(k) for k in ("samples", "ok", "invalid", "failed", "r2_test", "search_model",
                                       "best_sampled_ms", "default_measured_ms", "predicted_best_measured_ms",
                                       "speedup_over_default")})
    print("models", c["models"])
PY
exit $status
