#!/usr/bin/env bash
# The kernel workload on one lent GPU (one device call of at most 10 minutes): the example convolution's whole
# space (the Benchmark Hub's 4,362 configurations) through the real CLI, every configuration compiled, checked
# against the default configuration's output and timed; then samples per minute with and without compiling
# ahead (benchmarks/kernel_compile_ahead.py, fresh CuPy caches); then the C header of the picks.
# Usage (repository root): bash benchmarks/kernel_convolution_gpu.sh [OUT]   (default $OUT, else /tmp/out)
# MINUTES (default 5) bounds the sweep's measuring; a rerun with the same SWEEP_DIR resumes where it stopped
# (finished shards skipped, compiled modules loaded from CUPY_CACHE_DIR); AHEAD=0 skips the comparison.
# Wheels of dask/distributed/skops in .whl are installed to /tmp/site where present (the device image lacks them).
# Dry run: DRY_RUN=1 (no GPU: the sweep spec checked as `launchtune sweep` reads it, and the comparison's plan)
set -uo pipefail
OUT=${1:-${OUT:-/tmp/out}}; mkdir -p "$OUT"
source benchmarks/gpu_setup.sh  # wheels, PYTHONPATH, nvidia-smi.txt, device.json
export CUPY_CACHE_DIR=${CUPY_CACHE_DIR:-/tmp/cupy-kernel-convolution}
SWEEP=${SWEEP_DIR:-$SCRATCH/kernel_convolution}
date -u +"start %Y-%m-%dT%H:%M:%SZ" | tee "$OUT/run.log"
if [ -n "$DRY" ]; then
  python3 -m benchmarks.dry_run cluster_configs/sweeps/kernel_convolution.yaml 2>&1 | tee -a "$OUT/run.log"
  status=${PIPESTATUS[0]}
  if [ "${AHEAD:-1}" != 0 ]; then
    python3 -m benchmarks.kernel_compile_ahead --samples "${AHEAD_SAMPLES:-30,300}" --out "$OUT/compile_ahead.json" \
      $DRY 2>&1 | tee "$OUT/compile_ahead.log"
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  fi
  exit $status
fi
timeout "${SWEEP_LIMIT_S:-420}" python3 -m launchtune sweep cluster_configs/sweeps/kernel_convolution.yaml \
  --out "$SWEEP" --max-minutes "${MINUTES:-5}" 2>&1 | tee -a "$OUT/run.log"
status=${PIPESTATUS[0]}
date -u +"end %Y-%m-%dT%H:%M:%SZ rc=$status" | tee -a "$OUT/run.log"
tar -C "$(dirname "$SWEEP")" --exclude .dask -czf "$OUT/sweep.tar.gz" "$(basename "$SWEEP")"
cp "$SWEEP/report.md" "$SWEEP/tuning_table.json" "$OUT/" 2>/dev/null
python3 - "$SWEEP" <<'PY' 2>&1 | tee "$OUT/summary.txt"
import json, sys
import pyarrow.parquet as pq
d = sys.argv[1]
t = json.load(open(f"{d}/timing.json"))
rows = pq.read_table(f"{d}/merged").to_pandas()
print(f"measured {t['rows']} configurations (ok {t['ok']}) in {t['seconds']} s: {t['samples_per_minute']} per minute")
print(rows["status"].value_counts().to_dict())
print("compile s (sum of rows' compile_ms, overlapped with measuring):", round(rows["compile_ms"].sum() / 1e3, 1))
bad = rows[rows["status"] != "ok"]
if len(bad):
    print("reasons:", bad["reason"].str.slice(0, 90).value_counts().head(8).to_dict())
ok = rows[rows["status"] == "ok"]
params = [c for c in rows.columns if c in ("block_size_x", "block_size_y", "tile_size_x", "tile_size_y",
                                             "read_only", "use_padding", "use_shmem", "use_cmem")]
best = ok.nsmallest(1, "total_ms").iloc[0]
print("best", {p: int(best[p]) for p in params}, round(float(best["total_ms"]), 4), "ms; median",
      round(float(ok["total_ms"].median()), 4), "ms")
r = json.load(open(f"{d}/report.json"))
for cls, c in r["classes"].items():
    print(cls, {k: c.get(k) for k in ("samples", "ok", "invalid", "failed", "best_sampled_ms", "default_measured_ms",
                                       "predicted_best_measured_ms", "speedup_over_default")})
PY
if [ "${AHEAD:-1}" != 0 ]; then
  timeout "${AHEAD_LIMIT_S:-140}" python3 -m benchmarks.kernel_compile_ahead --samples "${AHEAD_SAMPLES:-30,300}" \
    --out "$OUT/compile_ahead.json" 2>&1 | tee "$OUT/compile_ahead.log"
  rc=${PIPESTATUS[0]}; echo "compile ahead rc=$rc"; [ "$rc" = 0 ] || status=$rc
fi
python3 -m launchtune export --format c-header "$SWEEP" "$OUT/convolution_tuned.h" 2>&1 | tail -2
rc=${PIPESTATUS[0]}; echo "export rc=$rc"; [ "$rc" = 0 ] || status=$rc
exit $status
