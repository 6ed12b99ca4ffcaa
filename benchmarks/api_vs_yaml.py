"""``launchtune.tune_kernel`` against the YAML sweep it stands for, on a GPU (issue 39).

The example convolution (``launchtune/kernels/examples/convolution.*``) tuned twice with the same seed and
budget: once from Python with numpy arrays (the very arrays the kernel spec's seeded fills make), once as a
YAML sweep run by ``launchtune sweep`` (the sweep spec ``tune_kernel`` wrote, pointed at the shipped kernel
spec instead of the one it wrote). Both must plan the same configurations; the picks are compared (a pick
is re-measured, so two configurations within the noise of each other may swap).

    python -m benchmarks.api_vs_yaml OUT [BUDGET]     # GPU only; prints a table, writes OUT/summary.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import yaml

import launchtune
from benchmarks import run_main
from launchtune.kernels.kernel.arguments import make_host
from launchtune.kernels.kernel.spec import load_kernel_spec
from launchtune.kernels.yamlfile import load_yaml
from launchtune.pipeline.store.folder import SweepFolder

SEED = 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="a new folder: api/, yaml/, yaml_sweep.yaml, summary.json")
    parser.add_argument("budget", type=int, nargs="?", default=40, help="random configurations (default 40)")
    args = parser.parse_args()
    out, budget = args.out.resolve(), args.budget
    example = Path(str(files("launchtune.kernels.examples") / "convolution.yaml"))
    spec = load_kernel_spec(example)
    problem = spec.problem(None)
    values = spec.values(problem)
    arguments = [make_host(a, i, values, 0) for i, a in enumerate(spec.arguments)]  # options.seed 0's fill
    t0 = time.perf_counter()
    # answer=None checks nothing (Kernel Tuner's meaning) where the YAML spec's output: true checks against
    # the default configuration: the two may differ in rows marked invalid, not in what is planned
    api = launchtune.tune_kernel(
        spec.kernel_name,
        spec.code,
        problem[:2],
        arguments,
        {p.name: list(p.values) for p in spec.params},
        restrictions=[r.text for r in spec.restrictions],
        grid_div_x=["block_size_x", "tile_size_x"],
        grid_div_y=["block_size_y", "tile_size_y"],
        cmem_args={"d_filter": arguments[2]},
        atol=spec.atol,
        default=spec.actual(spec.default),  # the YAML spec's baseline (the API's own: the first allowed)
        budget=budget,
        seed=SEED,
        out=out / "api",
    )
    api_s = time.perf_counter() - t0

    (inputs,) = (out / "api" / "inputs").iterdir()
    sweep = load_yaml(inputs / "sweep.yaml")
    sweep["options"] = {"spec": str(example), "seed": 0}
    sweep["description"] = "the same sweep as a YAML spec, on the shipped kernel spec"
    path = out / "yaml_sweep.yaml"
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    t0 = time.perf_counter()
    cli = [sys.executable, "-m", "launchtune", "sweep", str(path), "--out", str(out / "yaml")]
    subprocess.run(cli, check=True)
    yaml_s = time.perf_counter() - t0
    by_yaml = launchtune.load(out / "yaml")

    rows = {}
    for name, result in (("api", api), ("yaml", by_yaml)):
        folder = SweepFolder(result.folder)
        params, matrix = folder.read_plan_matrix(result.gpu_classes[0])
        frame = result.rows.sort_values("sample_id") if "sample_id" in result.rows else result.rows
        rows[name] = {
            "planned": matrix.tolist(),
            "params": params,
            "status": frame["status"].value_counts().to_dict(),
            "best": result.best,
            "best_ms": result.best_ms,
        }
    summary = {
        "budget": budget,
        "seed": SEED,
        "same_plan": rows["api"]["planned"] == rows["yaml"]["planned"],
        "same_params": rows["api"]["params"] == rows["yaml"]["params"],
        "same_pick": rows["api"]["best"] == rows["yaml"]["best"],
        "api": {k: v for k, v in rows["api"].items() if k != "planned"},
        "yaml": {k: v for k, v in rows["yaml"].items() if k != "planned"},
        "seconds": {"api": round(api_s, 1), "yaml": round(yaml_s, 1)},
        "planned": rows["api"]["planned"],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{'':6} {'ok':>4} {'invalid':>7} {'best ms':>9}  pick")
    for name in ("api", "yaml"):
        r = rows[name]
        ok, invalid = r["status"].get("ok", 0), r["status"].get("invalid", 0)
        print(f"{name:6} {ok:>4} {invalid:>7} {r['best_ms']:>9.4f}  {r['best']}")
    print(f"same plan: {summary['same_plan']}  same pick: {summary['same_pick']}")
    return 0 if summary["same_plan"] else 1


if __name__ == "__main__":
    run_main(main)
