"""Leave one GPU out on the seven-GPU convolution data, for variants of the combined model's target and
features: does any raise the count of held-out GPUs whose pick is within 10% of their optimum?

Loads the sources once through ``pipeline.learn.combine`` (merged, not trained), then for each variant and
each held-out GPU fits the project's own model makers (``design.model_makers``: gradient boosting on every
training row, the MLP on a seeded draw of at most ``--mlp-rows`` of each training GPU) and scores them with
``crossclass.scores``. Variants:

- ``base``: what ``combine`` does today (launch parameters + device facts, target log(ms)).
- ``norm``: target log(ms) minus the GPU's median log(ms) (the shape of the space, not the GPU's scale; the
  pick is unchanged by a per-GPU shift). R2 is on that normalised target (the held-out GPU's own median).
- ``ratio``: device facts as log2 and ratios (bandwidth per SM, FP32 per byte of bandwidth, LLC per SM).
- ``warp``: + warp/wavefront width and the block's width in warps, threads per block in warps, whether the
  block is a whole number of warps.
- combinations of these.

Usage (from the repository root, ``OPENBLAS_NUM_THREADS=1``; HUB: the Benchmark Hub's full convolution caches,
cachefiles/convolution_milo of a clone of the hub, see data/benchmark_hub/README.md):
    python -m lab.combined_variants data/convolution/h100/sweep $HUB \
        --models gbr,mlp --variants base,norm,ratio,warp,norm+ratio+warp
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

from launchtune.pipeline.learn.combine import combine
from launchtune.pipeline.learn.crossclass import WITHIN, scores
from launchtune.pipeline.learn.design import capped, design, device_features, model_makers, with_class_facts
from launchtune.pipeline.learn.models import make_gbr, make_mlp, one_thread
from launchtune.pipeline.store.folder import SweepFolder, ok_rows
from launchtune.pipeline.store.shards import load_merged

# Warp (NVIDIA) or wavefront (AMD) width HIP/CUDA run this kernel with: 32 on every NVIDIA GPU (CUDA
# Programming Guide, "warpSize"); 64 on CDNA (MI250X) and 32 on RDNA 2/3 (W6600, W7800) per the ROCm
# "GPU specifications" page (https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html, "Wavefront size").
WARP = {"a100": 32, "a4000": 32, "a6000": 32, "h100": 32, "mi250x": 64, "w6600": 32, "w7800": 32}


def load(paths: list[str]) -> tuple[pd.DataFrame, list[str], list[str], object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "combined"
        combine(out, [Path(p) for p in paths], log=lambda s: None, train=False)
        spec, _ = SweepFolder(out).read_spec()
        frame = load_merged(out)
    params = list(SweepFolder(paths[0]).read_meta()["plan"]["params"])
    rows = with_class_facts(ok_rows(frame, None)).reset_index(drop=True)
    device, _ = device_features(rows)
    return rows, params, device, spec


def add_variant_columns(rows: pd.DataFrame) -> pd.DataFrame:
    r = rows.copy()
    for f in (
        "peak_fp64_gflops",
        "spec_bandwidth_gbs",
        "spec_memory_gb",
        "sm_count",
        "peak_fp32_gflops",
        "llc_mb",
    ):
        r[f"log2_{f}"] = np.log2(r[f].astype(float))
    r["log2_bw_per_sm"] = np.log2(r["spec_bandwidth_gbs"] / r["sm_count"])
    r["log2_fp32_per_byte"] = np.log2(r["peak_fp32_gflops"] / r["spec_bandwidth_gbs"])
    r["log2_llc_per_sm"] = np.log2(r["llc_mb"] / r["sm_count"])
    r["warp_size"] = r["gpu_class"].map(WARP).astype(float)
    threads = r["block_size_x"] * r["block_size_y"]
    r["bx_in_warps"] = r["block_size_x"] / r["warp_size"]
    r["threads_in_warps"] = threads / r["warp_size"]
    r["whole_warps"] = (threads % r["warp_size"] == 0).astype(float)
    r["log_ms"] = np.log(r["total_ms"].astype(float))
    r["norm_log_ms"] = r["log_ms"] - r.groupby("gpu_class")["log_ms"].transform("median")
    return r


def features(variant: set[str], params: list[str], device: list[str]) -> list[str]:
    dev = list(device)
    if "ratio" in variant:
        vendor = [f for f in dev if f.startswith("vendor_")]
        dev = [
            "log2_peak_fp64_gflops",
            "log2_spec_bandwidth_gbs",
            "log2_sm_count",
            "log2_peak_fp32_gflops",
            "log2_llc_mb",
            "log2_bw_per_sm",
            "log2_fp32_per_byte",
            "log2_llc_per_sm",
            *vendor,
        ]
    if "warp" in variant:
        dev += ["warp_size", "bx_in_warps", "threads_in_warps", "whole_warps"]
    return params + dev


def maker(name: str, variant: set[str], spec, n: int):
    if "norm" in variant:  # the target is already a log, normalised: no further transform
        if name == "gbr":
            return make_gbr(spec.seed, log_target=False)
        return make_mlp(spec.train.hidden_layers, spec.train.max_epochs, spec.seed, n, log_target=False)
    return model_makers(spec, n, combined=True)[name]()


def run(rows, params, device, spec, variants, models, mlp_rows, log) -> list[dict]:
    results = []
    classes = sorted(rows["gpu_class"].unique())
    for vname in variants:
        variant = set(vname.split("+")) - {"base"}
        feats = features(variant, params, device)
        target = "norm_log_ms" if "norm" in variant else "total_ms"
        for held in classes:
            train, test = rows[rows["gpu_class"] != held], rows[rows["gpu_class"] == held]
            used = [f for f in feats if f in params or train[f].nunique() > 1]  # constant in training: out
            X, y = design(train, used), train[target].to_numpy(float)
            Xh = design(test, used)
            ms = test["total_ms"].to_numpy(float)
            for name in models:
                pos = np.arange(len(train))
                if name == "mlp":
                    pos = capped(train, pos, mlp_rows, spec.seed)
                t0 = time.perf_counter()
                with one_thread(), warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    model = maker(name, variant, spec, len(pos)).fit(X[pos], y[pos])
                    pred = model.predict(Xh)
                s = scores(ms, pred)  # rho, pick/best: on milliseconds (a monotone target keeps them)
                if "norm" in variant:  # R2 on the normalised target, the held-out GPU's own median
                    s["r2"] = scores(test["norm_log_ms"].to_numpy(float), pred)["r2"]
                    s["r2_on"] = "log(ms) - median"
                else:
                    s["r2_on"] = "ms"
                entry = {
                    "variant": vname,
                    "held": held,
                    "model": name,
                    "fit_rows": int(len(pos)),
                    "r2": s["r2"],
                    "r2_on": s["r2_on"],
                    "rho": s["spearman"],
                    "pick_over_best": s["picked_over_best"],
                    "within_10pct": bool(s["picked_over_best"] <= WITHIN),
                    "seconds": round(time.perf_counter() - t0, 1),
                }
                results.append(entry)
                log(json.dumps(entry))
    return results


def table(results: list[dict]) -> str:
    out = []
    frame = pd.DataFrame(results)
    for (vname, name), g in frame.groupby(["variant", "model"], sort=False):
        found = int(g["within_10pct"].sum())
        out.append(
            f"\n### {vname} / {name}: within 10% for {found} of {len(g)}; "
            f"median rho {g['rho'].median():.3f}, geometric mean pick/best "
            f"{np.exp(np.log(g['pick_over_best']).mean()):.3f}\n"
        )
        out.append("| held out | R2 | rho | pick/best | within 10% |\n| --- | ---: | ---: | ---: | --- |")
        for _, r in g.iterrows():
            out.append(
                f"| {r['held']} | {r['r2']:.3g} | {r['rho']:.3g} | {r['pick_over_best']:.4g} "
                f"| {'yes' if r['within_10pct'] else 'no'} |"
            )
    # the count a combine reporting both models would give: held-out GPUs found by at least one
    out.append("\n| variant | found by gbr | found by mlp | found by either |\n| --- | ---: | ---: | ---: |")
    for vname, g in frame.groupby("variant", sort=False):
        by = {m: set(g[(g["model"] == m) & g["within_10pct"]]["held"]) for m in g["model"].unique()}
        either = set().union(*by.values())
        out.append(f"| {vname} | {len(by.get('gbr', set()))} | {len(by.get('mlp', set()))} | {len(either)} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sources", nargs="*")
    p.add_argument("--show", type=Path, nargs="+", help="print the tables of saved --json results instead")
    p.add_argument("--variants", default="base,norm,ratio,warp,norm+ratio,norm+warp,norm+ratio+warp")
    p.add_argument("--models", default="gbr")
    p.add_argument("--mlp-rows", type=int, default=1000)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    if a.show:
        print(table([r for f in a.show for r in json.loads(f.read_text())]))
        return
    rows, params, device, spec = load(a.sources)
    rows = add_variant_columns(rows)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    log(f"{len(rows)} ok rows, classes {sorted(rows['gpu_class'].unique())}, device features {device}")
    results = run(rows, params, device, spec, a.variants.split(","), a.models.split(","), a.mlp_rows, log)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
