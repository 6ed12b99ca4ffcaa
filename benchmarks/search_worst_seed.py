"""The default search's worst seed, replayed on recorded spaces (no GPU; issue 45).

Runs ``evolve`` in named variants (``VARIANTS``: keyword options of ``evolve.tune``) over datasets, budgets
and seeds, one JSON line per run (the CLI's record without the configurations, plus ``variant`` and
``dataset``), appended to ``--out`` and skipped when already there, so an interrupted run resumes:

    python -m benchmarks.search_worst_seed --variant today --dataset data/cfd/h100/sweep_fused_arith/merged \\
        --budgets 100,200 --seeds 20 --out data/search_worst_seed/runs.jsonl

``--table`` prints, from such a file, mean / worst seed / seeds over 1.05 and 1.10 per variant, dataset and
budget (the table in docs/strategies.md).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from benchmarks import run_main
from launchtune.pipeline.errors import UserError

# ``evolve.search``'s options as before issue 45 (``today``); each variant changes some of them
TODAY: dict[str, Any] = {
    "levels": False,
    "level_explore": None,
    "level_thompson": False,
    "reserve": 0.0,
    "reserve_z": False,
    "reserve_cap": 1 << 30,
    "reserve_from": 0,
    "levels_from": 0,
    "stall_chance": False,
    "level_floor": 0.0,
}
LTS = {"levels": True, "level_explore": 0.5, "level_thompson": True, "reserve_z": True}
VARIANTS: dict[str, dict[str, Any]] = {
    name: {**TODAY, **change}
    for name, change in {
        "today": {},
        "reserve10": {"reserve": 0.1},
        "reserve20": {"reserve": 0.2},
        "reserve10z": {"reserve": 0.1, "reserve_z": True},
        "levels_reserve10": {"levels": True, "reserve": 0.1},
        "levels_reserve10z": {"levels": True, "reserve": 0.1, "reserve_z": True},
        "lx50_reserve10z": {"levels": True, "level_explore": 0.5, "reserve": 0.1, "reserve_z": True},
        "lts50_reserve10z": {**LTS, "reserve": 0.1},
        "lts50_reserve20z": {**LTS, "reserve": 0.2},
        "lts50_reserve10z_stall": {**LTS, "reserve": 0.1, "stall_chance": True},
        "reserve20cap20": {**LTS, "reserve": 0.2, "reserve_cap": 20},
        "final_with_turns": {**LTS, "reserve": 0.2, "reserve_cap": 20, "reserve_from": 100},
        "final_without_turns": {"reserve": 0.2, "reserve_cap": 20, "reserve_from": 100, "reserve_z": True},
    }.items()
}
# the default of the second session (before the level floor): the old ``final``, relabelled
VARIANTS["second"] = {"level_floor": 0.0}
# the default, as shipped (``evolve.WORST_CASE``): no options passed
VARIANTS["final"] = {}
# the fourth session's: the reserve uncapped at 400 (a fifth of the budget beyond 100), not kept (``fourth/``)
VARIANTS["cap60"] = {"reserve_cap": 60}
# issue 53: half the trees per generation, for a search's host time (data/search_overhead/cpu/README.md);
# kept (``final`` is now this); ``trees40`` is the forest before
VARIANTS["trees20"] = {"_trees": 20}
VARIANTS["trees40"] = {"_trees": 40}
# issue 53, third pass: each split of the generation's forest draws from sqrt(features) (scikit-learn's
# ``max_features``), not all ~379; or from half of them (kept: ``final`` is now this), or 30%
VARIANTS["sqrt"] = {"_max_features": "sqrt"}
VARIANTS["half_features"] = {"_max_features": 0.5}
VARIANTS["features30"] = {"_max_features": 0.3}
VARIANTS["all_features"] = {"_max_features": 1.0}
# issue 53: the initial design split between the fusion levels (``evolve.tune``'s ``cover_levels``),
# screened under the live noise of ``noisy_replay/`` (data/combined/search_worst_seed/noisy_replay/README.md)
VARIANTS["cover_levels"] = {"cover_levels": True}
# issue 53: the last 10 measurements re-measure the three best (``evolve.tune``'s ``confirm``)
VARIANTS["confirm10"] = {"confirm": 10}
VARIANTS["confirm10_cover"] = {"confirm": 10, "cover_levels": True}
# the third session's screen, each a change of ``second`` (``third/``: every space at 100 and 200
# measurements, 20 seeds; the fused CFD sweeps 40); ``level_floor`` at 0.5 is ``final``
VARIANTS.update(
    {
        name: {**VARIANTS["second"], **change}
        for name, change in {
            "floor25": {"level_floor": 0.25},
            "floor75": {"level_floor": 0.75},
            "floor100": {"level_floor": 1.0},
            "floor50_within15": {"level_floor": 0.5, "_within": 1.5},
            "floor50_within3": {"level_floor": 0.5, "_within": 3.0},
            "floor75_within15": {"level_floor": 0.75, "_within": 1.5},
            "floor100_within15": {"level_floor": 1.0, "_within": 1.5},
            "islands3": {"islands": 3},
            "explore35": {"explore": 0.35},
            "reserve30cap40": {"reserve": 0.3, "reserve_cap": 40},
            "initial33": {"initial_fraction": 0.33},
            "patience1": {"patience": 1},
            "generations30": {"generations": 30},
            "clip3": {"clip": 3.0},
            "kappa1": {"_kappa": 1.0},
        }.items()
    }
)
# variants whose options were tried and removed: the commit whose ``evolve.search`` ran their lines
# (data/combined/search_worst_seed/README.md)
RETIRED = {
    **dict.fromkeys(["effective_all", "effective", "effective_far", "final_restart4"], "484a5ef"),
    **dict.fromkeys(["polish3_far3", "polish2_far3"], "540914a"),
}


OVER = 1.05  # a pick this far off the optimum counts as a miss


def _records(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# variant keys that set a module's constant instead of passing an option
GLOBALS = {
    "_within": ("iterative", "FLOOR_WITHIN", 2.0),
    "_kappa": ("evolve", "KAPPA", 0.5),
    "_trees": ("evolve", "TREES", 20),
    "_max_features": ("evolve", "MAX_FEATURES", 0.5),
}


def _one(job: tuple[str, str, str, int, int, int, str | None]) -> dict[str, Any]:
    """One replayed search of ``evolve`` in ``variant``: the CLI's record without the configurations (with
    the live noise of the ``NoiseModel`` JSON file ``job[6]``, if given)."""
    from launchtune.pipeline.store.datasets import load_datasets
    from launchtune.pipeline.strategies import evolve, iterative
    from launchtune.pipeline.strategies.evaluate import run_one
    from launchtune.pipeline.strategies.replay import NoiseModel

    variant, path, gpu, budget, seed, parallel, noise_path = job
    noise = NoiseModel(**json.loads(Path(noise_path).read_text())) if noise_path else None
    if path not in _DATASETS:
        _DATASETS[path] = {d.name: d for d in load_datasets(path)}
    options = dict(VARIANTS[variant])
    modules = {"evolve": evolve, "iterative": iterative}
    for key, (module, name, default) in GLOBALS.items():
        setattr(modules[module], name, options.pop(key, default))
    original = evolve.__dict__.setdefault("_original_tune", evolve.tune)
    evolve.tune = lambda session, **kw: original(session, **{**options, **kw})
    try:
        r = run_one(_DATASETS[path][gpu], "evolve", budget, seed, parallel=parallel, noise=noise)
    finally:
        evolve.tune = original
    r.pop("config", None), r.pop("best_measured_config", None)
    return {
        "variant": variant,
        "dataset": path,
        **r,
        **({"parallel": parallel} if parallel > 1 else {}),
        **({"live_noise": noise_path} if noise_path else {}),
    }


_DATASETS: dict[str, dict[str, Any]] = {}  # a worker's datasets, read once


def run(
    variant: str,
    datasets: list[str],
    budgets: list[int],
    seeds: list[int],
    out: Path,
    jobs: int = 1,
    parallel: int = 1,
    live_noise: str | None = None,
) -> None:
    """Every (dataset, GPU, budget, seed) not yet in ``out``, on ``jobs`` processes (each search on one
    thread: its numbers do not depend on ``jobs``), appended to ``out`` as each ends. ``parallel``: each
    search with that many measurements in flight, as a live search over that many cards (the line says so).
    ``live_noise``: a ``NoiseModel`` JSON file whose noise each replay adds (the line names it)."""
    from contextlib import nullcontext
    from multiprocessing import Pool

    from launchtune.pipeline.store.datasets import load_datasets

    def key(r: dict[str, Any]) -> tuple:
        return (
            r["variant"],
            r["dataset"],
            r["gpu"],
            r["budget"],
            r["seed"],
            r.get("parallel", 1),
            r.get("live_noise"),
        )

    done = {key(r) for r in _records(out)}
    todo = [
        (variant, path, d.name, budget, seed, parallel, live_noise)
        for path in datasets
        for d in load_datasets(path)
        for budget in budgets
        for seed in seeds
        if (variant, path, d.name, budget, seed, parallel, live_noise) not in done
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    with Pool(jobs) if jobs > 1 else nullcontext() as pool, out.open("a") as f:
        for r in pool.imap_unordered(_one, todo) if pool else map(_one, todo):
            f.write(json.dumps(r) + "\n")
            f.flush()
            print(f"{variant} {r['gpu']} {r['budget']} {r['seed']} {r['ratio']:.3f} {r.get('p_faster', '')}")


def _name(dataset: str, gpu: str) -> str:
    """A dataset as the tables print it: the sweep folder, or the Hub's GPU."""
    return (
        f"Hub {gpu}"
        if "benchmark_hub" in dataset or "$HUB" in dataset
        else dataset.removeprefix("data/").removesuffix("/merged")
    )


def _cell(r) -> str:
    return f"{r.mean():.3f} / {r.max():.3f} ({int((r >= OVER).sum())})"


def alternatives(runs, baseline: str = "today") -> str:
    """Each variant against ``baseline`` on the same seeds: mean / worst seed (seeds at least 5% off)."""
    lines = [
        f"| variant | dataset | budget | seeds | {baseline}: mean / worst (over 1.05) "
        "| variant: mean / worst (over 1.05) |",
        "| --- | --- | ---: | --- | --- | --- |",
    ]
    today = runs[runs["variant"] == baseline].set_index(["dataset", "gpu", "budget", "seed"])["ratio"]
    order = [v for v in [*VARIANTS, *RETIRED] if v != baseline]
    for (v, ds, gpu, b), g in sorted(
        runs[runs["variant"] != baseline].groupby(["variant", "dataset", "gpu", "budget"]),
        key=lambda kv: (order.index(kv[0][0]), kv[0][1], kv[0][2], -kv[0][3]),
    ):
        seeds = sorted(g["seed"])
        keys = [(ds, gpu, b, s) for s in seeds]
        base = today.reindex(keys)
        whole = len(seeds) >= 10 and seeds == list(range(seeds[0], seeds[-1] + 1))
        shown = f"{seeds[0]}-{seeds[-1]}" if whole else ",".join(map(str, seeds))
        have = base.dropna()
        then = _cell(have) if len(have) == len(base) else "not run"
        if 0 < len(have) < len(base):
            then = f"{_cell(have)}, its {len(have)} seeds"
        lines.append(f"| {v} | {_name(ds, gpu)} | {b} | {shown} | {then} | {_cell(g['ratio'])} |")
    return "\n".join(lines) + "\n"


def summary(runs, variant: str = "final", baseline: str = "today") -> str:
    """Per dataset and budget: ``baseline`` against ``variant`` over the seeds both ran (the targets' table);
    where ``variant`` has no runs but ``baseline`` has (a budget the default searches as before), the
    baseline's runs and "as <baseline>"."""
    lines = [
        f"| dataset | budget | seeds ({baseline}'s) | {baseline}: mean | worst | over 1.05 | over 1.10 "
        "| now: mean | worst | over 1.05 | over 1.10 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    key = ["dataset", "gpu", "budget"]
    mine = {k: g for k, g in runs[runs["variant"] == variant].groupby(key)}
    before = {k: g for k, g in runs[runs["variant"] == baseline].groupby(key)}

    def cols(r) -> str:
        if not len(r):
            return " |  |  | "
        return f"{r.mean():.3f} | {r.max():.3f} | {int((r >= OVER).sum())} | {int((r >= 1.10).sum())}"

    for k in sorted(set(mine) | set(before), key=lambda k: (k[0], k[1], -k[2])):
        ds, gpu, b = k
        if k in mine:
            g = mine[k]
            base = (
                before[k].set_index("seed")["ratio"].reindex(g["seed"]).dropna()
                if k in before
                else g["ratio"][:0]
            )
            seeds = f"{len(g)} ({len(base)})" if len(base) != len(g) else f"{len(g)}"
            lines.append(f"| {_name(ds, gpu)} | {b} | {seeds} | {cols(base)} | {cols(g['ratio'])} |")
        else:
            r = before[k]["ratio"]
            lines.append(f"| {_name(ds, gpu)} | {b} | ({len(r)}) | {cols(r)} | as {baseline} |  |  |  |")
    return "\n".join(lines) + "\n"


def screen(runs, baseline: str) -> str:
    """Per variant and budget, over the runs it shares with ``baseline`` (same space and seed): the mean of
    the spaces' means, the worst seed, and the runs at least 5% off, for ``baseline`` and for the variant."""
    key = ["dataset", "gpu", "budget", "seed"]
    base = runs[runs["variant"] == baseline].set_index(key)["ratio"]
    lines = [
        f"| variant | budget | spaces | runs | {baseline}: mean / worst / off "
        "| variant: mean / worst / off |",
        "| --- | ---: | ---: | ---: | --- | --- |",
    ]

    def cell(r) -> str:
        means = r.groupby(level=["dataset", "gpu"]).mean()
        return f"{means.mean():.3f} / {r.max():.3f} / {int((r >= OVER).sum())}"

    order = list(VARIANTS) + list(RETIRED)
    for (v, b), g in sorted(
        runs[runs["variant"] != baseline].groupby(["variant", "budget"]),
        key=lambda kv: (order.index(kv[0][0]), -kv[0][1]),
    ):
        mine = g.set_index(key)["ratio"]
        mine = mine[mine.index.isin(base.index)]
        if not len(mine):
            continue
        spaces = len(mine.groupby(level=["dataset", "gpu"]))
        theirs = base.reindex(mine.index)
        lines.append(f"| {v} | {b} | {spaces} | {len(mine)} | {cell(theirs)} | {cell(mine)} |")
    return "\n".join(lines) + "\n"


def _least(ratios) -> str:
    import numpy as np

    finite = ratios[np.isfinite(ratios)]
    return f"{finite.min():.3f}" if len(finite) else "none recorded"


def needles(datasets: list[str]) -> str:
    """Per space: its recorded configurations, how many are within 5% and 10% of the optimum, the fastest
    recorded configuration one parameter away from the optimum, and the fastest two or more parameters away
    from every configuration within 5% (outside the optimum's basin: what a search that never entered the
    basin holds at best). Parameters count only where both configurations use them."""
    import numpy as np

    from launchtune.pipeline.store.datasets import load_datasets
    from launchtune.pipeline.strategies.base import Session
    from launchtune.pipeline.strategies.replay import ReplayWorkload

    lines = [
        "| space | configurations | within 5% of the optimum | within 10% | fastest one parameter away "
        "| fastest outside the basin |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for path in datasets:
        for d in load_datasets(path):
            workload = ReplayWorkload(d, seed=0)
            session = Session(workload, 1, 0, kernels=d.kernels, device={"dataset": d})
            t = np.array([workload.recorded_time(session.config(i))[0] for i in range(len(session.X))])
            ratio = t / np.nanmin(t)
            X = session.X if session.unused is None else np.where(session.unused, -1.0, session.X)
            best = int(np.nanargmin(t))
            near = (X != X[best]).sum(axis=1) == 1
            good = np.flatnonzero(ratio <= 1.05)
            outside = ((X[:, None, :] != X[good]).sum(axis=2) >= 2).all(axis=1)
            counts = f"{len(t)} | {int((ratio <= 1.05).sum())} | {int((ratio <= 1.10).sum())}"
            lines.append(
                f"| {_name(path, d.name)} | {counts} | {_least(ratio[near])} | {_least(ratio[outside])} |"
            )
    return "\n".join(lines) + "\n"


BINS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 1.0)


def calibration(runs, variant: str = "final") -> str:
    """``p_faster`` against what happened: per bin of the estimate, the runs, their mean estimate, and the
    share whose pick is at least 5% slower than the optimum (a configuration that much faster was left)."""
    import numpy as np

    mine = runs[(runs["variant"] == variant) & runs["p_faster"].notna()]
    lines = [
        "| p_faster | runs | mean p_faster | picks at least 5% off the optimum | share |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    edges = np.array(BINS)
    which = np.clip(np.searchsorted(edges, mine["p_faster"].to_numpy(), side="right") - 1, 0, len(BINS) - 2)
    for k in range(len(BINS) - 1):
        g = mine[which == k]
        if not len(g):
            continue
        off = int((g["ratio"] >= OVER).sum())
        lines.append(
            f"| {BINS[k]:.2f}-{BINS[k + 1]:.2f} | {len(g)} | {g['p_faster'].mean():.3f} | {off} | "
            f"{off / len(g):.2f} |"
        )
    off = int((mine["ratio"] >= OVER).sum())
    lines.append(
        f"| all | {len(mine)} | {mine['p_faster'].mean():.3f} | {off} | {off / max(1, len(mine)):.2f} |"
    )
    return "\n".join(lines) + "\n"


def by_budget(runs, variant: str = "final") -> str:
    """``variant`` per space and budget: mean / worst seed (seeds at least 5% off, of the seeds run). A run
    recorded in two files (the same space, budget and seed) counts once."""
    mine = runs[runs["variant"] == variant].drop_duplicates(["dataset", "gpu", "budget", "seed"])
    budgets = sorted(mine["budget"].unique())
    lines = [
        "| space | " + " | ".join(f"{b}: mean / worst (over 1.05 of seeds)" for b in budgets) + " |",
        "| --- |" + " --- |" * len(budgets),
    ]
    for (path, gpu), g in mine.groupby(["dataset", "gpu"], sort=True):
        cells = []
        for b in budgets:
            r = g.loc[g["budget"] == b, "ratio"]
            cells.append(
                f"{r.mean():.3f} / {r.max():.3f} ({int((r >= OVER).sum())} of {len(r)})" if len(r) else ""
            )
        lines.append(f"| {_name(path, gpu)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def by_strategy(paths: list[Path]) -> str:
    """``launchtune strategies --compare`` runs (``runs.csv[.gz]``), per strategy and budget: each GPU's
    mean / worst seed, and the mean over the Benchmark Hub's GPUs (their names are capitalised; our sweeps'
    classes, lower case, are columns of their own)."""
    import pandas as pd

    runs = pd.concat([pd.read_csv(p) for p in paths])
    gpus = sorted(runs["gpu"].unique(), key=lambda g: (g.lower() == g, g))
    hub = [g for g in gpus if g.lower() != g]
    names = [g if g in hub else f"our {g} sweep" for g in gpus]
    lines = [
        "| strategy | budget | seeds | " + " | ".join(f"{n}: mean / worst" for n in names) + " | Hub: mean |",
        "| --- | ---: | ---: |" + " --- |" * len(gpus) + " ---: |",
    ]
    for (strategy, budget), g in runs.groupby(["strategy", "budget"], sort=True):
        cells = []
        for gpu in gpus:
            r = g.loc[g["gpu"] == gpu, "ratio"]
            cells.append(f"{r.mean():.3f} / {r.max():.3f}" if len(r) else "")
        on_hub = g[g["gpu"].isin(hub)].groupby("gpu")["ratio"].mean()
        lines.append(
            f"| {strategy} | {budget} | {g['seed'].nunique()} | "
            + " | ".join(cells)
            + f" | {on_hub.mean():.3f} |"
        )
    return "\n".join(lines) + "\n"


def write(path: Path, out: Path, baseline: str = "today", default: str = "final") -> None:
    """``alternatives.md``, ``summary.md`` and ``calibration.md`` in ``out``, from the records at ``path``:
    each variant against ``baseline``; ``default`` (the search the tables call "now") in the summary and the
    calibration."""
    import pandas as pd

    runs = pd.DataFrame(_records(path))
    out.mkdir(parents=True, exist_ok=True)
    (out / "alternatives.md").write_text(alternatives(runs, baseline))
    (out / "summary.md").write_text(summary(runs, default, baseline))
    (out / "calibration.md").write_text(calibration(runs, default))
    if baseline != "today":  # the third session's screen: every variant on every space (``third/``)
        (out / "screen.md").write_text(screen(runs, baseline))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="today", choices=sorted(VARIANTS))
    p.add_argument("--dataset", action="append", default=[])
    p.add_argument("--budgets", default="100,200")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--seed", type=int, action="append", help="only these seeds (repeatable)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tables", type=Path, help="write the tables from --out's records into this folder")
    p.add_argument(
        "--baseline", default="today", help="the variant --tables compares against (default today)"
    )
    p.add_argument("--default", default="final", help="the variant --tables calls 'now' (default final)")
    p.add_argument("--needles", action="store_true", help="print how alone each --dataset's optimum is")
    p.add_argument(
        "--by-budget",
        type=Path,
        action="append",
        default=[],
        metavar="RUNS",
        help="with --tables: by_budget.md, the --default variant per space and budget from these records "
        "(repeatable) and --out's",
    )
    p.add_argument(
        "--compare",
        type=Path,
        action="append",
        default=[],
        metavar="CSV",
        help="with --tables: by_strategy.md, each strategy's mean and worst seed per GPU from these "
        "`launchtune strategies --compare` runs.csv[.gz] (repeatable)",
    )
    p.add_argument("--parallel", type=int, default=1, help="measurements in flight per search (default 1)")
    p.add_argument("--jobs", type=int, default=1, help="searches at once, one process each (default 1)")
    p.add_argument(
        "--live-noise",
        metavar="FILE",
        help="add live noise to every replay: a NoiseModel JSON (benchmarks/noisy_replay.py fits one)",
    )
    a = p.parse_args(argv)
    if a.needles:
        print(needles(a.dataset), end="")
        return 0
    if a.tables and not any(_records(path) for path in [*a.by_budget, a.out]):
        raise UserError(f"--out {a.out}: no runs recorded there to make --tables from")
    if a.tables and (a.by_budget or a.compare):
        import pandas as pd

        a.tables.mkdir(parents=True, exist_ok=True)
        runs = pd.DataFrame([r for path in [*a.by_budget, a.out] for r in _records(path)])
        (a.tables / "by_budget.md").write_text(by_budget(runs, a.default))
        if a.compare:
            (a.tables / "by_strategy.md").write_text(by_strategy(a.compare))
        return 0
    if a.tables:
        write(a.out, a.tables, a.baseline, a.default)
        return 0
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    seeds = a.seed if a.seed else list(range(a.seeds))
    budgets = [int(b) for b in a.budgets.split(",")]
    run(a.variant, a.dataset, budgets, seeds, a.out, a.jobs, a.parallel, a.live_noise)
    return 0


if __name__ == "__main__":
    run_main(main)
