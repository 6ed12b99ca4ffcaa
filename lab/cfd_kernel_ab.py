"""Revisions of the fused stage kernel against each other, in one process, on one GPU (issue 16).

A change to ``kernels/cfd/fused.cu`` is worth keeping only if it is faster than the text it replaces on the
same card in the same run, and gives the same answer. This compiles ``fused.cu`` of a base revision
(``git show REV:kernels/cfd/fused.cu``, or ``--base-file``) and of the working tree, each with optional extra
``#define`` lines (``--version LABEL=NAME=VALUE,...``), into one solver per version, then:

- after 100 steps from the same state, compares every version's state with the base's for each configuration
  (bitwise expected: a revision that changes the answer is reported, not timed silently);
- times every (version, configuration) pair in R interleaved rounds, a fresh seeded random order each round
  (CUDA events around ``--steps`` steps after a warm-up step), and reports each version's median over the
  base's with a 95% interval (``kernels.compare``) and its effective bandwidth on the stage level's fewest
  bytes.

Only the variants the configurations use are compiled for the extra versions (the space's constraints are
those of the working tree's kernels).

    python -m lab.cfd_kernel_ab --out DIR --base 13ad17f --version p0=STAGE_PREFETCH=0 \\
        --version p1=STAGE_PREFETCH=1 [--configs stage_best,stage_h100_row] [--arith 1] [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np

from lab.cfd_arith import CONFIGS, agreement, ms_per_step, state_after
from launchtune.kernels.backend import get_backend
from launchtune.kernels.compare import compare
from launchtune.kernels.device import describe_device

FUSED_PATH = "kernels/cfd/fused.cu"


def version_code(tree_code: str, defines: str) -> str:
    """The working tree's fused.cu with ``NAME=VALUE,...`` as ``#define`` lines before it."""
    lines = []
    for item in filter(None, defines.split(",")):
        name, _, value = item.partition("=")
        if not name.isidentifier() or not value:
            raise SystemExit(f"--version: {item!r} is not NAME=VALUE")
        lines.append(f"#define {name} {value}\n")
    return "".join(lines) + tree_code


def parse_versions(items: list[str], tree_code: str) -> dict[str, str]:
    versions: dict[str, str] = {}
    for item in items:
        label, _, defines = item.partition("=")
        if not label or label == "base" or label in versions:
            raise SystemExit(
                f"--version {item!r}: give LABEL=NAME=VALUE,... with a new label other than 'base'"
            )
        versions[label] = version_code(tree_code, defines)
    return versions or {"tree": tree_code}


def main() -> int:
    from benchmarks.cfd_step import fused_min_bytes, min_bytes
    from launchtune.kernels.cfd.solver import Solver
    from launchtune.kernels.device import measure_copy_bandwidth

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for results.json")
    ap.add_argument("--base", default="HEAD", help="git revision of the base fused.cu (default HEAD)")
    ap.add_argument("--base-file", type=Path, help="the base fused.cu as a file (instead of --base)")
    ap.add_argument(
        "--version",
        action="append",
        default=[],
        help="LABEL=NAME=VALUE,...: the working tree's fused.cu with these #defines (repeatable; default: "
        "the tree as it is, labelled 'tree')",
    )
    stage = ",".join(n for n, c in CONFIGS.items() if c["fusion"] == 2)
    ap.add_argument("--configs", default=stage, help=f"names in cfd_arith.CONFIGS (default {stage})")
    ap.add_argument("--arith", default="1", help="tile.arith values, comma-separated (default 1)")
    ap.add_argument("--size", default="3328x1024", help="cells, NXxNY (default: the inlet's 3328x1024)")
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed call (default 10)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the rounds' random order (default 0)")
    args = ap.parse_args()

    tree_code = Path(FUSED_PATH).read_text()
    if args.base_file:
        base_code, base_from = args.base_file.read_text(), str(args.base_file)
    else:
        base_code = subprocess.run(
            ["git", "show", f"{args.base}:{FUSED_PATH}"], check=True, capture_output=True, text=True
        ).stdout
        base_from = subprocess.run(
            ["git", "rev-parse", "--short", args.base], check=True, capture_output=True, text=True
        ).stdout.strip()
    codes = {"base": base_code, **parse_versions(args.version, tree_code)}
    unknown = [n for n in args.configs.split(",") if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"--configs: unknown {unknown}; known: {', '.join(CONFIGS)}")

    backend = get_backend("cupy")
    nx, ny = (int(v) for v in args.size.lower().split("x"))
    solvers = {label: Solver("inlet", (nx, ny), "cupy") for label in codes}
    space = solvers["base"].space("fused")  # the working tree's space (and its compiled limits)
    for label, code in codes.items():
        solvers[label].use_fused_code(code)
    configs = {
        f"{name}_arith{a}": space.validate({**space.default, **CONFIGS[name], "tile.arith": int(a)})
        for name in args.configs.split(",")
        for a in args.arith.split(",")
    }
    s0 = solvers["base"]
    seven = sum(min_bytes(nx, ny, s0.scheme.stages, s0.setup.source_mode).values())
    stage_bytes = fused_min_bytes(nx, ny, s0.scheme.stages, "stage", seven)
    copy_gbs = measure_copy_bandwidth(backend)
    runs = [(label, name) for label in codes for name in configs]

    def timed(label: str, name: str) -> float:
        return ms_per_step(solvers[label], configs[name], args.steps)

    def state(label: str, name: str) -> np.ndarray:
        return state_after(solvers[label], configs[name])

    agree: dict[str, dict[str, dict]] = {}
    registers: dict[str, dict[str, int]] = {}
    local: dict[str, dict[str, int]] = {}  # bytes of local memory per thread (spills)
    for name in configs:
        want = state("base", name)
        for label in codes:
            got = want if label == "base" else state(label, name)
            attributes = solvers[label].fused_attributes["stage_fused"]
            registers.setdefault(label, {})[name] = attributes["num_regs"]
            local.setdefault(label, {})[name] = attributes["local_size_bytes"]
            if label != "base":
                agree.setdefault(label, {})[name] = agreement(got, want)
    times: dict[str, list[float]] = {f"{label}/{name}": [] for label, name in runs}
    rng = np.random.default_rng(args.seed)
    for _ in range(args.rounds):
        for i in rng.permutation(len(runs)):
            label, name = runs[i]
            times[f"{label}/{name}"].append(timed(label, name))
    median = {k: float(np.median(v)) for k, v in times.items()}
    ratios = []
    for label, name in runs:
        if label == "base":
            continue
        c = compare(times[f"base/{name}"], times[f"{label}/{name}"], seed=0)
        ratios.append(
            {
                "config": name,
                "version": label,
                "ratio": c.ratio,
                "low": c.low,
                "high": c.high,
                "verdict": c.verdict,
            }
        )
    fraction_of_copy = {k: stage_bytes / (m * 1e-3) / 1e9 / copy_gbs for k, m in median.items()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    defines = {
        label: code[: len(code) - len(tree_code)] if label != "base" else "" for label, code in codes.items()
    }
    result = {
        "device": describe_device(backend),
        "size": [nx, ny],
        "base": base_from,
        "versions": defines,
        "rounds": args.rounds,
        "steps_per_call": args.steps,
        "seed": args.seed,
        "copy_gbs": copy_gbs,
        "stage_min_bytes_per_step": stage_bytes,
        "configs": configs,
        "registers": registers,
        "local_bytes_per_thread": local,
        "median_ms_per_step": median,
        "fraction_of_copy": fraction_of_copy,
        "agreement_with_base_after_100_steps": agree,
        "ratios": ratios,
        "times": times,
    }
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    print(f"base {base_from}; copy {copy_gbs:.0f} GB/s; % of copy on the stage level's fewest bytes")
    print("| configuration | version | registers, local B | ms/step | % of copy | vs base [95%] | same |")
    print("| --- | --- | --- | ---: | ---: | --- | --- |")
    for name in configs:
        for label in codes:
            k = f"{label}/{name}"
            r = next((x for x in ratios if x["version"] == label and x["config"] == name), None)
            vs = f"{r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}] {r['verdict']}" if r else ""
            a = agree.get(label, {}).get(name)
            same = (
                "" if a is None else ("bitwise" if a["bitwise"] else f"{max(a['rel_diff_per_variable']):.1e}")
            )
            print(
                f"| {name} | {label} | {registers[label][name]}, {local[label][name]} | {median[k]:.3f} | "
                f"{100 * fraction_of_copy[k]:.0f} | {vs} | {same} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
