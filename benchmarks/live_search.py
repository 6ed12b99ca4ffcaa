"""Live searches on this machine's GPU against a committed sweep, in one process and one local cluster.

    python -m benchmarks.live_search --reference data/cfd/h100/sweep_fused_arith \\
        --strategies evolve,iterative --budgets 100,200 --seeds 0,1,2,3,4 --out DIR

Where the sweep's workload states an objective (a kernel spec's ``objective:``), every figure here is the
objective's cost (``kernels.objective``: time per step for the heat example), not the launch's time.

Each (strategy, budget, seed) is the live path of ``launchtune sweep --strategy`` (``search_class``:
the strategy's proposals measured by the cluster's worker, one shard each, the journal) on the reference
sweep's spec, in its own sweep folder ``DIR/<strategy>-<budget>-seed<seed>`` (merged; not trained), with
its wall time from the first proposal to the last answer. One cluster serves them all, so the workload is
built and its kernels compiled once. Then, on the same worker, every pick and the reference sweep's fastest
recorded rows (``--top-rows``, one per configuration that runs alike) are re-measured in ``--rounds``
interleaved rounds (each round times every configuration once, in a rotated order), and each pick is
compared with the fastest of those rows: the median of the per-round ratios with its 95% bootstrap interval
(``launchtune.kernels.compare``).

Writes ``DIR/searches.jsonl`` (one line per search, as it ends), ``DIR/remeasure.json`` and ``DIR/summary.md``
(per strategy and budget: mean over seeds of pick / best row, mean wall time, against the reference sweep's
measuring time from its ``timing.json``).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import run_main
from benchmarks.dry_run import done
from launchtune.kernels.compare import bootstrap_interval, compare
from launchtune.kernels.objective import cost_of
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.folder import PLAN_FACTS, SweepFolder
from launchtune.pipeline.store.schema import cost_column
from launchtune.pipeline.store.shards import load_merged, merge
from launchtune.pipeline.store.spec import SearchSpec, SweepSpec, load_spec, parse_spec
from launchtune.pipeline.sweep.priors import check_params, constants_of, load_priors


def rounds_task(spec: dict[str, Any], configs: list[dict[str, int]], repeats: int, rounds: int) -> dict:
    """On the worker: one warm-up run of each configuration, then ``rounds`` rounds timing each once (total
    ms of ``repeats`` steps, median), in an order rotated every round so no configuration always follows
    the same one."""
    from launchtune.pipeline.sweep.worker import get_workload

    workload, facts = get_workload(spec)
    space = workload.space()
    valid = [space.validate(c) for c in configs]
    for c in valid:
        workload.run(c, repeats)
    times = np.zeros((rounds, len(valid)))
    for r in range(rounds):
        for k in range(len(valid)):
            j = (k + r) % len(valid)
            times[r, j] = cost_of(workload.run(valid[j], repeats))  # the objective's (time by default)
    return {"times": times.tolist(), "device": facts}


def reference_rows(reference: Path, gpu_class: str, params: list[str], n: int, spec: SweepSpec) -> list[dict]:
    """The reference sweep's ``n`` fastest ok rows of ``gpu_class``, one per configuration that runs alike."""
    from launchtune.kernels.space import Inactive, Param, Space

    merged = load_merged(reference)
    cost = cost_column(list(merged.columns))  # the objective's cost where the rows have one
    rows = merged[(merged["gpu_class"] == gpu_class) & (merged["status"] == "ok")].sort_values(cost)
    _, facts = SweepFolder(reference).read_spec()
    space = Space(
        tuple(Param(p, tuple(facts["values"][p])) for p in params),
        {p: int(facts["default"][p]) for p in params},
        inactive=tuple(Inactive(w, tuple(v), tuple(u)) for w, v, u in facts.get("inactive") or []),
    )
    seen, out = set(), []
    for _, row in rows.iterrows():
        config = {p: int(row[p]) for p in params}
        key = space.active_key(config)
        if key not in seen:
            seen.add(key)
            out.append({"config": config, "recorded_ms": float(row[cost])})
        if len(out) >= n:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reference", type=Path, help="a committed sweep folder: its fastest rows (and its spec)")
    p.add_argument(
        "--spec", type=Path, help="the sweep spec (default: the reference's); alone: picks against picks"
    )
    p.add_argument(
        "--reference-configs",
        type=Path,
        help="instead of --reference: a JSON list of {config, recorded_ms} to compare the picks with",
    )
    p.add_argument("--prior", action="append", default=[], help="recorded data for transfer (repeatable)")
    p.add_argument("--strategies", default="evolve,iterative")
    p.add_argument("--budgets", default="100,200")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument(
        "--extra",
        default="",
        help="more searches as STRATEGY@BUDGET, comma-separated (each seed): transfer@20",
    )
    p.add_argument("--gpu-class", default=None, help="the class to compare against (default: this GPU's)")
    p.add_argument("--top-rows", type=int, default=5, help="reference rows re-measured (default 5)")
    p.add_argument("--rounds", type=int, default=11, help="interleaved rounds of the re-measure (default 11)")
    p.add_argument("--pool", type=int, default=None, help="candidate pool per search (default: the CLI's)")
    p.add_argument(
        "--shard",
        default=None,
        help="K/N: run only every N-th search of the list from the K-th (one process per card, in parallel)",
    )
    p.add_argument(
        "--join",
        type=Path,
        nargs="+",
        default=None,
        help="instead of searching: join these runs' folders (one per card) into --out's summary",
    )
    p.add_argument(
        "--max-seconds",
        type=float,
        default=None,
        help="start no search after this long (the searches then run seed by seed, every strategy each "
        "seed, so a cut leaves whole seeds); the re-measure follows with what ran",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: check the spec, the reference, the priors and every search's spec with the project's "
        "loaders, write DIR/plan.json (the searches it would run) and stop",
    )
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.join:
        return join(args.join, args.out, dry_run=args.dry_run)
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = open(args.out / "run.log", "a")  # noqa: SIM115  (the whole run)

    def log(msg: str) -> None:
        line = f"{datetime.now(UTC).strftime('%H:%M:%S')} {msg}"
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    if args.spec is None and args.reference is None:
        p.error("--reference or --spec is needed")
    if args.spec is not None:  # a folder's spec may name files by paths of the machine that made it
        base = load_spec(args.spec)
    else:
        base, _ = SweepFolder(args.reference).read_spec()
    base = replace(base, name="live_search", gpu_classes=None, output=None)
    prior = load_priors(args.prior, base) if args.prior else []
    runs = [
        (s, int(b), int(seed))
        for s in args.strategies.split(",")
        for b in args.budgets.split(",")
        for seed in args.seeds.split(",")
    ]
    for item in filter(None, args.extra.split(",")):
        strategy, _, budget = item.rpartition("@")
        runs += [(strategy, int(budget), int(seed)) for seed in args.seeds.split(",")]
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        runs = runs[k::n]
    if args.max_seconds is not None:
        runs.sort(key=lambda r: r[2])  # seed by seed (stable: the strategies' order within a seed)
    if not runs:
        raise UserError("--strategies/--budgets/--seeds/--shard: no search to run")
    if args.dry_run:
        return dry_run(args, base, runs, log)
    # what measures, imported only here: a dry run needs none of it (the cluster, the strategies' models)
    from launchtune.pipeline.cluster import open_cluster
    from launchtune.pipeline.cluster.waits import result, wait_limit
    from launchtune.pipeline.sweep.measure import warm_workers, workers_by_class
    from launchtune.pipeline.sweep.search import run_searches, search_pool_plan, top_picks

    began = time.perf_counter()
    searches_path = args.out / "searches.jsonl"
    with open_cluster("local", None, 1, args.out / ".dask", log) as handle:
        limit = wait_limit(handle.kind)
        cls = args.gpu_class or handle.gpu_classes[0]
        t = time.perf_counter()
        warm_workers(handle.client, base.to_dict(), [cls], log, timeout=600)
        widths = workers_by_class(handle.client, [cls])  # every visible card of the class searches
        log(f"workload built on the worker in {time.perf_counter() - t:.1f} s")
        picks = []
        for strategy, budget, seed in runs:
            if args.max_seconds is not None and time.perf_counter() - began > args.max_seconds:
                log(
                    f"--max-seconds {args.max_seconds:g} passed: {strategy} {budget} seed {seed} and the "
                    "searches after it not run"
                )
                break
            spec = replace(base, seed=seed, search=SearchSpec(strategy, budget, tuple(args.prior)))
            out = args.out / f"{strategy}-{budget}-seed{seed}"
            plan = search_pool_plan(handle.client, spec, cls, limit, args.pool)
            check_params(prior, plan["params"], "--prior", constants_of(plan["values"]))
            folder = SweepFolder(out)
            facts = {k: v for k, v in plan.items() if k != "pool"}
            folder.write_plan(
                cls, {**facts, "n_configs": len(plan["pool"]), "search": spec.to_dict()["search"]}
            )
            folder.write_meta(
                {
                    "spec": spec.to_dict(),
                    "planning_key": spec.planning_key(),
                    "plan": {k: plan[k] for k in PLAN_FACTS if k in plan},
                    "updated": datetime.now(UTC).isoformat(timespec="seconds"),
                }
            )
            t = time.perf_counter()
            found = run_searches(handle.client, spec, {cls: plan}, out, widths, prior, log, limit)[cls]
            wall = time.perf_counter() - t
            merge(out, log=log)
            (config, ms), *_ = top_picks(found.session, 1)
            record = {
                "strategy": strategy,
                "budget": budget,
                "seed": seed,
                "gpu_class": cls,
                "pool": len(plan["pool"]),
                "measured": found.session.used,
                "measured_now": found.measured,
                "workers": found.width,
                "wall_s": round(wall, 2),
                "pick": config,
                "pick_search_ms": ms,
            }
            picks.append(record)
            with open(searches_path, "a") as f:
                f.write(json.dumps(record) + "\n")
            log(f"{strategy} {budget} seed {seed}: pick {ms:.4f} ms in {wall:.1f} s")
        if not picks and runs:  # the workload took longer to build than --max-seconds: nothing to re-measure
            raise UserError(
                f"--max-seconds {args.max_seconds:g}: passed before the first search started (the workload "
                f"took {time.perf_counter() - began:.0f} s to build); give it more"
            )
        rows = []
        if args.reference is not None:
            rows = reference_rows(args.reference, cls, list(plan["params"]), args.top_rows, base)
            if not rows:  # a sweep of another card (an H100's on an H200): its fastest rows, re-measured here
                classes = sorted(set(load_merged(args.reference)["gpu_class"]))
                log(f"{args.reference} has no {cls} rows: its {classes[0]} rows, re-measured on this card")
                rows = reference_rows(args.reference, classes[0], list(plan["params"]), args.top_rows, base)
        elif args.reference_configs is not None:
            rows = json.loads(args.reference_configs.read_text())[: args.top_rows]
        configs = [r["config"] for r in rows] + [r["pick"] for r in picks]
        future = handle.client.submit(
            rounds_task,
            base.to_dict(),
            configs,
            base.validate.repeats,
            args.rounds,
            resources={cls: 1},
            pure=False,
            key=f"rounds-{time.time_ns()}",
        )
        answer = result(future, "the re-measure of picks and reference rows", limit)
    times = np.array(answer["times"])
    medians = np.median(times, axis=0)
    # the fastest reference row; without a reference, the fastest pick (each pick against the best found)
    ref = int(np.argmin(medians[: len(rows)] if rows else medians))
    for k, r in enumerate(rows):
        r["remeasured_ms"] = float(medians[k])
    for k, r in enumerate(picks):
        j = len(rows) + k
        c = compare(times[:, ref].tolist(), times[:, j].tolist(), seed=k).as_dict()
        r["remeasured_ms"] = float(medians[j])
        r["against_best_row"] = {k2: c[k2] for k2 in ("ratio", "low", "high", "verdict")}
    timing = (SweepFolder(args.reference).read_timing() if args.reference else None) or {}
    summary = {
        "reference": str(args.reference or args.reference_configs or args.spec),
        "spec": str(args.spec) if args.spec else None,
        "best_is_pick": not rows,
        "reference_rows": rows,
        "best_row": ref,
        "reference_sweep_seconds": timing.get("seconds"),
        "reference_sweep_rows": timing.get("rows"),
        "rounds": args.rounds,
        "repeats": base.validate.repeats,
        "device": answer["device"],
        "searches": picks,
    }
    (args.out / "remeasure.json").write_text(json.dumps(summary, indent=1, default=str))
    text = markdown(summary)
    (args.out / "summary.md").write_text(text)
    log("\n" + text)
    log_file.close()
    return 0


def dry_run(args: argparse.Namespace, base: SweepSpec, runs: list[tuple[str, int, int]], log: Any) -> int:
    """What a CPU can check of a live search: each search's spec as the project reads it back (strategy,
    budget, seed, priors), the reference sweep's rows and timing or the reference configurations; the
    searches it would run go to ``DIR/plan.json``. Every refusal is the project's own ``UserError``."""
    specs = []
    for strategy, budget, seed in runs:
        spec = replace(base, seed=seed, search=SearchSpec(strategy, budget, tuple(args.prior)))
        where = str(args.out / f"{strategy}-{budget}-seed{seed}")
        written = {k: v for k, v in spec.to_dict().items() if k != "source"}  # what its sweep.json holds
        specs.append(parse_spec(written, where).to_dict())  # checked as a spec file of those keys would be
    reference: dict[str, Any] = {}
    if args.reference is not None:
        merged = load_merged(args.reference)
        ok = merged[merged["status"] == "ok"]
        if ok.empty:
            raise UserError(f"--reference {args.reference}: no ok rows to compare the picks with")
        timing = SweepFolder(args.reference).read_timing() or {}
        reference = {
            "folder": str(args.reference),
            "ok_rows": len(ok),
            "classes": sorted(set(ok["gpu_class"])),
        }
        reference["sweep_seconds"] = timing.get("seconds")
    elif args.reference_configs is not None:  # written by an earlier step of the same call (heat_one_step)
        reference = {"configs": str(args.reference_configs), "exists": args.reference_configs.is_file()}
        if reference["exists"]:
            reference["rows"] = len(json.loads(args.reference_configs.read_text()))
    plan = {"searches": [dict(zip(("strategy", "budget", "seed"), r, strict=True)) for r in runs]}
    plan.update(reference=reference, rounds=args.rounds, specs=specs)
    (args.out / "plan.json").write_text(json.dumps(plan, indent=1, default=str))
    log(f"{len(runs)} searches planned, their specs checked: {args.out / 'plan.json'}")
    return done("benchmarks.live_search", f"{len(runs)} searches, their specs checked")


def join(dirs: list[Path], out: Path, dry_run: bool = False) -> int:
    """One summary of several runs (one process per card with ``--shard``; or one card against all): each
    run re-measured its picks against the reference rows on its own card, so a pick's ratio is against its
    run's fastest row. ``dry_run``: the runs were planned, not measured: say which would be joined."""
    if dry_run:
        return done("benchmarks.live_search", f"would join {', '.join(map(str, dirs))} into {out}")
    parts = [json.loads((d / "remeasure.json").read_text()) for d in dirs]
    summary = dict(parts[0])
    summary["cards"] = [
        {
            "folder": str(d),
            "device": p["device"],
            "best": p["reference_rows"][p["best_row"]] if p["reference_rows"] else None,
        }
        for d, p in zip(dirs, parts, strict=True)
    ]
    searches = [{**r, "card": k} for k, p in enumerate(parts) for r in p["searches"]]
    summary["searches"] = sorted(
        searches, key=lambda r: (r["strategy"], r["budget"], r["workers"], r["seed"])
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "remeasure.json").write_text(json.dumps(summary, indent=1, default=str))
    (out / "summary.md").write_text(markdown(summary))
    print(markdown(summary))
    return 0


def seed_interval(ratios: list[float], seed: int = 0) -> tuple[float, float]:
    """A 95% interval of the mean over seeds (seeded bootstrap, percentile method): how far the mean of a few
    seeds could move with other seeds. One seed: its own value."""
    r = np.asarray(ratios, dtype=float)
    if r.size < 2 or np.ptp(r) == 0.0:
        return float(r.min()), float(r.max())
    return bootstrap_interval(r, np.mean, seed=seed)


def markdown(summary: dict[str, Any]) -> str:
    """Per strategy and budget: pick / best row (mean over seeds, and each seed's), and the wall time."""
    searches = summary["searches"]
    if summary["best_is_pick"]:
        best = searches[summary["best_row"]]
        head = (
            f"Spec: {summary['reference']}; no reference rows: each pick against the fastest re-measured "
            "pick "
            f"({best['strategy']} {best['budget']} seed {best['seed']}: {best['remeasured_ms']:.4f} ms)."
        )
    else:
        best = summary["reference_rows"][summary["best_row"]]
        head = (
            f"Reference: {summary['reference']}, its fastest recorded rows re-measured; the fastest of them: "
            f"{best['remeasured_ms']:.4f} ms (recorded {best['recorded_ms']:.4f})."
        )
        if summary["reference_sweep_rows"] is not None:  # a sweep folder, not a list of configurations
            head += (
                f" The reference sweep measured {summary['reference_sweep_rows']} configurations in "
                f"{summary['reference_sweep_seconds']} s."
            )
    cards = summary.get("cards") or []
    if len(cards) > 1 and not summary["best_is_pick"]:
        fastest = ", ".join(f"{c['best']['remeasured_ms']:.4f}" for c in cards)
        head = (
            f"Reference: {summary['reference']}, its fastest recorded rows re-measured in each of "
            f"{len(cards)} runs joined here, each on its own card or cards (each pick against its run's "
            f"fastest row): {fastest} ms (recorded "
            f"{cards[0]['best']['recorded_ms']:.4f}). The reference sweep measured "
            f"{summary['reference_sweep_rows']} configurations in {summary['reference_sweep_seconds']} s."
        )
    lines = [
        head,
        "",
        "| strategy | budget | cards | seeds | pick / best row, mean [95% over seeds] | per seed [95%] "
        "| wall s, mean | wall / sweep's |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    groups: dict[tuple[str, int, int], list[dict]] = {}
    for r in searches:
        groups.setdefault((r["strategy"], r["budget"], r["workers"]), []).append(r)
    for (strategy, budget, workers), g in groups.items():
        ratios = [r["against_best_row"]["ratio"] for r in g]
        each = "; ".join(
            f"{r['against_best_row']['ratio']:.3f} [{r['against_best_row']['low']:.3f}, "
            f"{r['against_best_row']['high']:.3f}]"
            for r in g
        )
        wall = float(np.mean([r["wall_s"] for r in g]))
        sweep = summary["reference_sweep_seconds"]
        against = f"{wall / sweep:.3f}" if sweep else "n/a"
        low, high = seed_interval(ratios)
        head = (
            f"| {strategy} | {budget} | {workers} | {len(g)} | {np.mean(ratios):.3f} [{low:.3f}, {high:.3f}] "
        )
        lines.append(head + f"| {each} | {wall:.1f} | {against} |")
    lines += head_to_head(searches)
    return "\n".join(lines) + "\n"


def head_to_head(searches: list[dict[str, Any]]) -> list[str]:
    """Where ours and Kernel Tuner's strategies ran at the same budget: each pair's ratio of mean pick / best
    row over seeds, with its 95% bootstrap interval and verdict (``strategies.uncertainty.ratio_interval``,
    as for the replayed tables). ``transfer`` is left out: it starts from other GPUs' data."""
    import pandas as pd

    from launchtune.pipeline.strategies.uncertainty import ratio_interval

    runs = pd.DataFrame(
        [
            {
                "strategy": r["strategy"],
                "budget": r["budget"],
                "gpu": "live",
                "ratio": r["against_best_row"]["ratio"],
            }
            for r in searches
            if r["workers"] == 1
        ]
    )
    if runs.empty:
        return []
    kt = sorted(s for s in runs["strategy"].unique() if s.startswith("kt:"))
    ours = sorted(s for s in runs["strategy"].unique() if not s.startswith("kt:") and s != "transfer")
    rows = []
    for budget in sorted(runs["budget"].unique()):
        at = set(runs.loc[runs["budget"] == budget, "strategy"])
        for a in (s for s in ours if s in at):
            for b in (s for s in kt if s in at):
                r = ratio_interval(runs, a, b, int(budget))
                interval = f"{r['ratio']:.3f} [{r['low']:.3f}, {r['high']:.3f}]"
                rows.append(f"| {budget} | {a} | {b} | {interval} | {r['verdict']} |")
    if not rows:
        return []
    return [
        "",
        "| budget | ours | Kernel Tuner | ours / Kernel Tuner, mean pick / best row [95%] | verdict |",
        "| ---: | --- | --- | --- | --- |",
        *rows,
    ]


if __name__ == "__main__":
    run_main(main)
