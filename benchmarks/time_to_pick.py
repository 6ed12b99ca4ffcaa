"""Time to a tuned configuration, side by side with Kernel Tuner 1.5 on one GPU (issue 53): our default search
and Kernel Tuner's genetic algorithm at the same budget, each called as a user calls it, then every pick
re-measured in one process.

    python -m benchmarks.time_to_pick --out DIR [--cases heat@100,heat@400,convolution@100] [--seeds 0]

Each case at each budget and seed is two runs, each in a fresh process with cold compile caches (its own
``CUPY_CACHE_DIR``, ``TMPDIR`` and ``LAUNCHTUNE_RESULTS``): ``launchtune.tune_kernel(..., strategy="default",
strategy_options={"max_fevals": B})`` and ``kernel_tuner.tune_kernel(..., strategy="genetic_algorithm",
strategy_options={"max_fevals": B})``, every other argument the same:

- ``heat``: the heat example (``kernels/examples/heat.cu``, its space, restrictions, shared memory, grid
  divisors and objective ``ms_per_step`` read from ``heat.yaml``) written as one ``tune_kernel`` call;
- ``convolution``: Kernel Tuner's own convolution example (``tests/kernel_tuner_examples/convolution.py``, its
  space of 1.87 million configurations after its restriction), run as its script with ``tune_kernel`` wrapped
  to add the strategy, its options and the seed (launchtune's run: the import changed, as
  ``benchmarks.kernel_tuner_examples`` does).

``--lang cupy`` (the default) adds ``lang="cupy"`` to every call of both tools: Kernel Tuner then compiles
with NVRTC through CuPy, as launchtune does, instead of nvcc through PyCUDA (its default, seconds a
configuration more); ``--lang script`` leaves the calls as written. Python's and numpy's generators are seeded
with the seed in each process before the arrays are made (Kernel Tuner's genetic algorithm draws from them),
and ``seed=`` is passed to both. The two tools' runs are interleaved (ours, KT, ours, KT, ...) so drift hits
both. Recorded per run: the wall time from the call to its return (``call_s``) and from the process's start to
it (``process_s``), the pick (the tool's ``env["best_config"]``), its objective as the tool measured it, and
the rows measured. A run past ``--run-timeout``, the ``--deadline``, or (Kernel Tuner's) ``--kt-cap`` times
ours' time plus 10 s is killed: its time is a lower bound and its pick the best of what its Kernel Tuner cache
(``cache=``, given to both tools) held.

Then, in this process, every pick of a case is timed with launchtune's kernel workload built from the spec
launchtune's run wrote (the same source, arrays and launch geometry for every pick): one warm-up, then
``--rounds`` rounds of ``--repeats`` launches each (CUDA events), each round in a rotated order; a pick's
figure is the median over rounds of its objective, and ours is compared with Kernel Tuner's of the same case,
budget and seed round by round (``launchtune.kernels.compare``: median ratio, 95% bootstrap interval).

``--examples vector_add,stencil``: Kernel Tuner's examples run first with both tools through
``benchmarks.kernel_tuner_examples`` (each script's wall time).

Writes ``DIR/time_to_pick.json`` (settings, runs, re-measure, examples; ``DIR/device.json`` copied in where
there is one) and ``DIR/table.md`` (:func:`table`, printed last). ``--table FILE`` prints the table of a
written JSON. ``--dry-run``: no GPU; every run's process starts and builds its call, launchtune's call is
made up to its no-GPU refusal, Kernel Tuner's arguments are bound to its signature, and a stand-in pick is
recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmarks import run_main

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tests" / "kernel_tuner_examples"
HEAT = ROOT / "kernels" / "examples"
CASES = ("heat", "convolution")
DEFAULT_CASES = "heat@100,heat@400,convolution@100"
OURS, KT = "launchtune", "kernel_tuner"
KT_STRATEGY = "genetic_algorithm"
MIN_RUN_S = 20  # no run starts with less than this left before the deadline
EXAMPLE_TIMEOUT_S = 90  # an example's script, each tool (both took under 10 s on an H200)
KT_CAP_STARTUP_S = 10  # --kt-cap: Kernel Tuner's run may take this long more, for its start


# ---------------------------------------------------------------- the calls (in each run's own process)


def heat_call() -> dict[str, Any]:
    """The heat example as one ``tune_kernel`` call that both tools take: ``heat.yaml``'s space, restrictions,
    shared memory, grid divisors and objective (minimize ``ms_per_step``, the metric as the same string)."""
    import numpy as np

    from launchtune.kernels.yamlfile import load_yaml

    spec = load_yaml(HEAT / "heat.yaml", "the heat example's spec")
    nx, ny = spec["problem_size"]
    arguments = [
        np.zeros((ny, nx), np.float32),
        np.random.default_rng(0).uniform(0, 1, (ny, nx)).astype(np.float32),
        np.int32(nx),
        np.int32(ny),
        np.float32(0.2),  # heat.yaml's alpha
    ]
    return {
        "kernel_name": spec["kernel_name"],
        "kernel_source": (HEAT / spec["source"]).read_text(),
        "problem_size": (nx, ny),
        "arguments": arguments,
        "tune_params": spec["tune_params"],
        "grid_div_x": spec["grid_div_x"],
        "grid_div_y": spec["grid_div_y"],
        "restrictions": spec["restrictions"],
        "smem_args": {"size": spec["shared_memory"]},
        "metrics": {"ms_per_step": spec["metrics"]["ms_per_step"]},
        "objective": "ms_per_step",
        "objective_higher_is_better": False,
    }


def heat_space_sizes() -> dict[str, int]:
    """Configurations of the heat call's space in each tool: Kernel Tuner's ``Searchspace`` of its arguments
    (its 1,024-thread block limit) and launchtune's space of ``heat.yaml``; a difference is one line (the
    call no longer says what the spec does)."""
    from kernel_tuner.searchspace import Searchspace

    from benchmarks.dry_run import kernel_space
    from launchtune.kernels.yamlfile import load_yaml
    from launchtune.pipeline.errors import UserError

    spec = load_yaml(HEAT / "heat.yaml", "the heat example's spec")
    sizes = {
        "kernel_tuner": int(Searchspace(spec["tune_params"], spec["restrictions"], 1024).size),
        "launchtune": sum(
            1 for _ in kernel_space(HEAT / "heat.yaml", "x".join(map(str, spec["problem_size"]))).grid()
        ),
    }
    if len(set(sizes.values())) != 1:
        raise UserError(f"heat: the two tools' spaces differ ({sizes}): the call is not heat.yaml's")
    return sizes


def objective_of(case: str) -> Callable[[Mapping[str, Any]], float]:
    """The case's objective of a result row (lower is better): ms per step for heat, else the time."""
    if case == "heat":
        return lambda row: float(row["time"]) / float(row["steps_per_launch"])
    return lambda row: float(row["time"])


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _summary_of(case: str, results: list[dict], env: Mapping[str, Any], params: list[str]) -> dict[str, Any]:
    """A run's pick (the tool's ``env['best_config']``), its objective as the tool measured it, rows, rows
    ok."""
    ok = [r for r in results if _finite(r.get("time"))]
    best = env.get("best_config") if isinstance(env, Mapping) else None
    pick = (
        {p: best[p] for p in params} if isinstance(best, Mapping) and all(p in best for p in params) else None
    )
    value = (
        objective_of(case)(best)
        if pick is not None and best is not None and _finite(best.get("time"))
        else None
    )
    return {"pick": pick, "pick_value": value, "rows": len(results), "ok": len(ok)}


def child(job: dict[str, Any]) -> int:
    """One run in this process: seed, build the call, call the tool, write the record (``job['record']``)."""
    import numpy as np

    t_start = time.time()
    seed = int(job["seed"])
    random.seed(seed)
    np.random.seed(seed)
    record: dict[str, Any] = {"t_child_start": t_start}
    extra: dict[str, Any] = {
        "strategy": job["strategy"],
        "strategy_options": {"max_fevals": int(job["budget"])},
        "seed": seed,
    }
    if job.get("cache"):
        extra["cache"] = job["cache"]
    if job.get("lang"):
        extra["lang"] = job["lang"]
    dry = bool(job.get("dry_run"))

    def call(original: Callable[..., Any], args: tuple, kw: dict[str, Any]) -> Any:
        kw = {**kw, **extra}
        params = list((args[4] if len(args) > 4 else kw["tune_params"]).keys())
        record["t_call"] = time.time()
        Path(job["record"]).write_text(json.dumps(record))  # a killed run's start of the call
        t0 = time.perf_counter()
        pair = _dry_call(job["tool"], original, args, kw) if dry else original(*args, **kw)
        record["call_s"] = time.perf_counter() - t0
        record["t_return"] = time.time()
        Path(job["record"]).write_text(json.dumps(record))
        results, env = pair
        record.update(_summary_of(job["case"], list(results), env, params))
        Path(job["record"]).write_text(json.dumps(record, default=str))
        return pair

    if job["tool"] == KT:
        import kernel_tuner as module
        import kernel_tuner.interface

        original = module.tune_kernel
    else:
        import launchtune.api as module

        original = module.tune_kernel

    def wrapped(*args: Any, **kw: Any) -> Any:
        return call(original, args, kw)

    if job["case"] == "heat":
        wrapped(**heat_call())
        return 0
    # Kernel Tuner's script, run as a user runs it, in this folder beside its .cu file
    import runpy

    module.tune_kernel = wrapped
    if job["tool"] == KT:
        kernel_tuner.interface.tune_kernel = wrapped
    sys.argv = [f"{job['case']}.py"]
    runpy.run_path(f"{job['case']}.py", run_name="__main__")
    return 0


def _dry_call(tool: str, original: Callable[..., Any], args: tuple, kw: dict[str, Any]) -> Any:
    """Without a GPU: Kernel Tuner's arguments bound to its signature; launchtune's call made up to its no-GPU
    refusal (every argument checked before it); then the first configuration as a stand-in pick."""
    import inspect

    inspect.signature(original).bind(*args, **kw)
    if tool == OURS:
        from launchtune.api import NoGPUError

        try:
            original(*args, **kw)
        except NoGPUError:
            pass
        else:
            raise RuntimeError("dry run: launchtune measured (a GPU is visible): run without --dry-run")
    params = args[4] if len(args) > 4 else kw["tune_params"]
    first = {p: list(v)[0] for p, v in params.items()}
    row = {**first, "time": 1.0}
    return [row], {"best_config": row}


# ---------------------------------------------------------------- the runs (this process)


def parse_cases(text: str) -> list[tuple[str, int]]:
    """``heat@100,convolution@400`` as (case, budget) pairs; a case we do not have is one line."""
    from launchtune.pipeline.errors import UserError

    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        case, _, budget = item.partition("@")
        if case not in CASES or not budget.isdigit() or int(budget) < 1:
            raise UserError(f"--cases: {item!r} is not CASE@BUDGET (cases: {', '.join(CASES)})")
        out.append((case, int(budget)))
    if not out:
        raise UserError("--cases: no case to run")
    return out


def plan_runs(cases: list[tuple[str, int]], seeds: list[int]) -> list[dict[str, Any]]:
    """Seed by seed, case by case, the two tools' runs side by side (ours, then Kernel Tuner's: its run's
    time limit can then follow ours' time, ``--kt-cap``)."""
    return [
        {"case": case, "budget": budget, "seed": seed, "tool": tool}
        for seed in seeds
        for case, budget in cases
        for tool in (OURS, KT)
    ]


_RUNNING: list[int] = []  # the process group of the run under way (its own session)


def _end_running(signum: int, frame: Any) -> None:
    """SIGTERM (the GPU script's ``timeout``): the run under way ends with this process, not after it."""
    for pid in _RUNNING:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    raise SystemExit(128 + signum)


def _tail(path: Path, n: int = 3) -> list[str]:
    try:
        return path.read_text(errors="replace").strip().splitlines()[-n:]
    except OSError:
        return []


def run_process(run: dict[str, Any], folder: Path, args: argparse.Namespace, timeout_s: float) -> dict:
    """One run in a fresh process in ``folder`` (cold caches of its own); its record with the wall times."""
    folder.mkdir(parents=True)
    if run["case"] != "heat":
        for source in EXAMPLES.glob("*.cu"):
            (folder / source.name).write_bytes(source.read_bytes())
        script = (EXAMPLES / f"{run['case']}.py").read_text()
        if run["tool"] == OURS:
            from benchmarks.kernel_tuner_examples import with_launchtune

            script = with_launchtune(script)
        (folder / f"{run['case']}.py").write_text(script)
    job = {
        **run,
        "strategy": args.ours_strategy if run["tool"] == OURS else KT_STRATEGY,
        "lang": None if args.lang == "script" else args.lang,
        "cache": str(folder / "cache.json") if args.cache else None,
        "record": str(folder / "record.json"),
        "dry_run": args.dry_run,
    }
    for sub in ("cupy-cache", "results", "tmp"):
        (folder / sub).mkdir()
    env = {
        **os.environ,
        "CUPY_CACHE_DIR": str(folder / "cupy-cache"),
        "LAUNCHTUNE_RESULTS": str(folder / "results"),
        "TMPDIR": str(folder / "tmp"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, "-m", "benchmarks.time_to_pick", "--child", json.dumps(job)]
    status = "ok"
    t_spawn = time.time()
    with open(folder / "run.log", "wb") as log:
        proc = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        _RUNNING[:] = [proc.pid]
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:  # the whole run's process group: the tool's compilers too
            os.killpg(proc.pid, signal.SIGKILL)
            rc = proc.wait()
            status = "timeout"
        finally:
            _RUNNING.clear()
    wall = time.time() - t_spawn
    record_path = folder / "record.json"
    record = json.loads(record_path.read_text()) if record_path.is_file() else {}
    out = {**run, "strategy": job["strategy"], "lang": job["lang"], "rc": rc, "wall_s": round(wall, 2)}
    # the call returned: the run is measured (what a script does after it, its json.dump, is not timed)
    if "call_s" in record:
        out.update(
            status="ok",
            call_s=round(record["call_s"], 3),
            process_s=round(record["t_return"] - t_spawn, 3),
            startup_s=round(record["t_call"] - t_spawn, 3),
            **{k: record.get(k) for k in ("pick", "pick_value", "rows", "ok")},
        )
    else:
        out["status"] = status if status == "timeout" else "failed"
        if "t_call" in record:
            out["startup_s"] = round(record["t_call"] - t_spawn, 3)
        out["call_s_at_least"] = round(wall - out.get("startup_s", 0.0), 3)
        out.update(_partial_pick(run["case"], folder / "cache.json"))
    out["last_lines"] = _tail(folder / "run.log")
    return out


def _partial_pick(case: str, cache: Path) -> dict[str, Any]:
    """A killed run's best so far, from its Kernel Tuner cache (both tools append each result as measured)."""
    from launchtune.kernel_tuner_compat import read_cache

    try:
        data = read_cache(cache)
    except (ValueError, OSError):
        data = None
    if not data:
        return {"pick": None, "pick_value": None, "rows": 0, "ok": 0}
    params = list(data.get("tune_params_keys") or [])
    entries = list(data["cache"].values())
    ok = [e for e in entries if _finite(e.get("time"))]
    cost = objective_of(case)
    best = min(ok, key=cost) if ok else None
    return {
        "pick": {p: best[p] for p in params} if best else None,
        "pick_value": cost(best) if best else None,
        "rows": len(entries),
        "ok": len(ok),
        "partial": True,
    }


# ---------------------------------------------------------------- the re-measure (this process, one GPU)


def remeasure(runs: list[dict], specs: dict[str, str], rounds: int, repeats: int, log: Callable) -> dict:
    """Every pick of each case timed on launchtune's kernel workload of that case (built once from the spec
    launchtune's run wrote): a warm-up, then ``rounds`` rounds each timing every distinct pick once with
    ``repeats`` launches, in an order rotated every round. Per case: the configurations and the times."""
    import numpy as np

    from launchtune.kernels.kernel import live
    from launchtune.kernels.objective import cost_of
    from launchtune.pipeline.store.spec import load_spec
    from launchtune.pipeline.sweep.worker import get_workload

    out: dict[str, Any] = {}
    for case, path in specs.items():
        picks = [r for r in runs if r["case"] == case and r.get("pick")]
        configs: list[dict] = []
        for r in picks:
            if r["pick"] not in configs:
                configs.append(r["pick"])
            r["remeasure_index"] = configs.index(r["pick"])
        if not configs:
            continue
        t0 = time.perf_counter()
        workload: Any
        with live.attached(
            Path(path).parent / "kernel.yaml", _stand_in_arrays(Path(path).parent / "kernel.yaml")
        ):
            workload, facts = get_workload(load_spec(path).to_dict())  # the kernel workload (its .spec)
        space = workload.space()
        valid = []
        for c in list(configs):
            try:
                valid.append(space.validate({n: workload.spec.index_of(n, c[n]) for n in space.names}))
            except ValueError as exc:  # outside launchtune's space of the case: said, not timed
                log(f"re-measure {case}: {c} left out ({exc})")
                configs.remove(c)
        for r in picks:
            if r["pick"] in configs:
                r["remeasure_index"] = configs.index(r["pick"])
            else:
                r.pop("remeasure_index", None)
        if not configs:
            continue
        for c in valid:
            workload.run(c, repeats)
        times = np.zeros((rounds, len(valid)))
        for k in range(rounds):
            for i in range(len(valid)):
                j = (i + k) % len(valid)
                times[k, j] = cost_of(workload.run(valid[j], repeats))
        medians = np.median(times, axis=0)
        for r in picks:
            if "remeasure_index" in r:
                r["remeasured"] = float(medians[r["remeasure_index"]])
        out[case] = {"spec": path, "configs": configs, "times": times.tolist(), "device": facts}
        log(f"re-measure {case}: {len(configs)} picks, {rounds} rounds in {time.perf_counter() - t0:.1f} s")
    return out


def _stand_in_arrays(kernel_yaml: Path) -> Any:
    """What the run's ``tune_kernel`` kept in its own process: on one local GPU the arrays are used in place,
    not written (``fill: {caller: ...}`` in its kernel spec), so this process hands the workload zeros of the
    same dtype and shape (a launch's time does not depend on the values here; nothing is checked)."""
    import numpy as np

    from launchtune.kernels.backend import get_backend
    from launchtune.kernels.kernel import live
    from launchtune.kernels.yamlfile import load_yaml

    xp = get_backend("auto").xp
    arguments = load_yaml(kernel_yaml, "the run's kernel spec").get("arguments", [])
    arrays = {
        i: xp.zeros(a["shape"], dtype=np.dtype(a["dtype"]))
        for i, a in enumerate(arguments)
        if isinstance(a.get("fill"), dict) and "caller" in a["fill"]
    }
    return live.Attached(arrays=arrays)


def _spec_of(folder: Path) -> str | None:
    """The sweep spec launchtune's ``tune_kernel`` wrote in a run's folder (written before it measures)."""
    found = sorted((folder / "results").glob("*/inputs/*/sweep.yaml"))
    return str(found[0]) if found else None


# ---------------------------------------------------------------- the table (from the JSON alone)


def pairs(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Ours against Kernel Tuner's per case, budget and seed: times, their ratio (a bound where a run was
    killed), each tool's pick re-measured and ours over theirs round by round (ratio, 95% interval,
    verdict)."""
    from launchtune.kernels.compare import compare

    out = []
    runs = data["runs"]
    keys = sorted(
        {(r["case"], r["budget"], r["seed"]) for r in runs}, key=lambda k: (CASES.index(k[0]), k[1], k[2])
    )
    for case, budget, seed in keys:
        by = {r["tool"]: r for r in runs if (r["case"], r["budget"], r["seed"]) == (case, budget, seed)}
        ours, kt = by.get(OURS), by.get(KT)
        if ours is None or kt is None:
            continue
        row: dict[str, Any] = {"case": case, "budget": budget, "seed": seed, "ours": ours, "kt": kt}
        a, b = ours.get("call_s"), kt.get("call_s")
        if a is not None and b:  # (a dry run's stand-in takes no time: no ratio)
            row["time_ratio"], row["bound"] = a / b, "="
        elif a is not None and kt.get("call_s_at_least"):
            row["time_ratio"], row["bound"] = a / kt["call_s_at_least"], "<"  # Kernel Tuner took longer
        elif b is not None and ours.get("call_s_at_least"):
            row["time_ratio"], row["bound"] = ours["call_s_at_least"] / b, ">"
        times = (data.get("remeasure") or {}).get(case, {}).get("times")
        if times and "remeasure_index" in ours and "remeasure_index" in kt:
            column = list(zip(*times, strict=True))
            c = compare(column[kt["remeasure_index"]], column[ours["remeasure_index"]], seed=seed)
            row["pick"] = {"ratio": c.ratio, "low": c.low, "high": c.high, "verdict": c.verdict}
        out.append(row)
    return out


def _s(run: Mapping[str, Any]) -> str:
    if run.get("call_s") is not None:
        return f"{run['call_s']:.1f}"
    return (
        f"> {run['call_s_at_least']:.0f} ({run['status']})" if run.get("call_s_at_least") else run["status"]
    )


def _process(run: Mapping[str, Any]) -> str:
    return f"{run['process_s']:.1f}" if run.get("process_s") is not None else "-"


def _rows(run: Mapping[str, Any]) -> str:
    text = f"{run.get('ok', 0)}/{run.get('rows', 0)}"
    return text + "*" if run.get("partial") else text


def _meets(row: Mapping[str, Any]) -> str:
    fast = "time_ratio" in row and row["bound"] in ("=", "<") and row["time_ratio"] <= 0.5
    good = "pick" in row and row["pick"]["verdict"] != "slower"
    if not (fast and good):
        return "no"
    return "yes, against its pick so far" if row["kt"].get("partial") else "yes"


def table(data: Mapping[str, Any]) -> str:
    """The Markdown of a ``time_to_pick.json``: a sentence of what was run where, the searches' table, and the
    examples' (where they ran)."""
    s = data["settings"]
    device = data.get("device") or {}
    card = device.get("device_name") or device.get("name") or "a GPU"
    lang = "lang='cupy' in every call" if s["lang"] == "cupy" else "each call as written"
    head = (
        f"{'Dry run (stand-in picks, nothing measured): ' if s.get('dry_run') else ''}"
        f"On one {card}, Kernel Tuner {data.get('kernel_tuner', '?')}: our `{s['ours_strategy']}` search and "
        f"Kernel Tuner's `{KT_STRATEGY}` at the same budget, each a fresh process with cold compile caches "
        f"({lang}); seconds from the call to its return (planning and compiling included), the pick "
        f"re-measured in one process ({s['rounds']} interleaved rounds of {s['repeats']} launches, median; "
        "ours over Kernel Tuner's with its 95% interval). `>`: killed at that time (at the run's time "
        "limit, the call's deadline or a multiple of ours' time); rows marked * are what its cache held."
    )
    lines = [
        head,
        "",
        "| case | budget | seed | ours s | Kernel Tuner s | ours / KT time | ours' pick / KT's, re-measured "
        "| verdict | s from process start, ours; KT | rows ok/measured, ours; KT | at most 0.5x, no worse |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- | --- |",
    ]
    for row in pairs(data):
        ratio = (
            f"{'< ' if row['bound'] == '<' else '> ' if row['bound'] == '>' else ''}{row['time_ratio']:.2f}"
            if "time_ratio" in row
            else "-"
        )
        pick = row.get("pick")
        interval = f"{pick['ratio']:.3f} [{pick['low']:.3f}, {pick['high']:.3f}]" if pick else "-"
        lines.append(
            f"| {row['case']} | {row['budget']} | {row['seed']} | {_s(row['ours'])} | {_s(row['kt'])} "
            f"| {ratio} | {interval} | {pick['verdict'] if pick else '-'} "
            f"| {_process(row['ours'])}; {_process(row['kt'])} | {_rows(row['ours'])}; {_rows(row['kt'])} "
            f"| {_meets(row)} |"
        )
    examples = data.get("examples") or []
    if examples:
        lines += [
            "",
            "| Kernel Tuner's example, through `tune_kernel` | ours s | Kernel Tuner s | ours / KT "
            "| at most 1x |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        names = list(dict.fromkeys(e["example"] for e in examples))
        for name in names:
            by = {e["tool"]: e for e in examples if e["example"] == name}
            ours, kt = by.get("launchtune"), by.get("kt")
            if ours is None or kt is None:
                continue
            done = ours["rc"] == 0 and kt["rc"] == 0
            ratio = ours["seconds"] / kt["seconds"]
            lines.append(
                f"| {name} | {ours['seconds']:.1f} | {kt['seconds']:.1f} | {ratio:.2f} "
                f"| {('yes' if ratio <= 1 else 'no') if done else 'did not run to its end'} |"
            )
    return "\n".join(lines) + "\n"


def readme_row(data: Mapping[str, Any]) -> str:
    """The README's Measured row: ours over Kernel Tuner's time per case and budget, and the picks."""
    device = data.get("device") or {}
    card = device.get("device_name") or "GPU"
    cells = []
    for row in pairs(data):
        if "time_ratio" not in row:
            continue
        bound = {"=": "", "<": "< ", ">": "> "}[row["bound"]]
        pick = row.get("pick")
        said = f", pick {pick['ratio']:.3f}x theirs" if pick else ""
        cells.append(
            f"{row['case']} at {row['budget']} (seed {row['seed']}): {bound}{row['time_ratio']:.2f}x{said}"
        )
    examples = data.get("examples") or []
    walls = {(e["example"], e["tool"]): e["seconds"] for e in examples}
    for name in dict.fromkeys(e["example"] for e in examples):
        if (name, "launchtune") in walls and (name, "kt") in walls:
            cells.append(f"its {name} example {walls[name, 'launchtune'] / walls[name, 'kt']:.2f}x")
    return (
        f"| time to a tuned configuration against Kernel Tuner {data.get('kernel_tuner', '?')} on one "
        f"{card}: our default search and its genetic algorithm at the same budget, wall time from the call "
        "to the pick | ours over Kernel Tuner's: "
        + "; ".join(cells)
        + " (picks re-measured in one process) | [docs/kernel.md](docs/kernel.md) |"
    )


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--cases", default=DEFAULT_CASES, help=f"CASE@BUDGET, comma-separated (default {DEFAULT_CASES})"
    )
    p.add_argument("--seeds", default="0", help="comma-separated (default 0)")
    p.add_argument("--examples", default="vector_add,stencil", help="Kernel Tuner's examples first ('' none)")
    p.add_argument("--lang", choices=("cupy", "script"), default="cupy")
    p.add_argument("--ours-strategy", default="default", help="launchtune's strategy (default: default)")
    p.add_argument("--run-timeout", type=float, default=240, help="seconds a run may take (default 240)")
    p.add_argument(
        "--deadline",
        type=float,
        default=420,
        help="seconds from the start: no run starts after, each ends by then",
    )
    p.add_argument(
        "--kt-cap",
        type=float,
        default=2.5,
        help="kill Kernel Tuner's run past this many times ours' call (+10 s): its time is then a bound "
        "enough for 'ours at most 1/CAP of it', and the call's device time goes further (0: off)",
    )
    p.add_argument("--rounds", type=int, default=11)
    p.add_argument("--repeats", type=int, default=7, help="launches per round (tune_kernel's iterations)")
    p.add_argument("--no-cache", dest="cache", action="store_false", help="no cache= (no partial picks)")
    p.add_argument("--dry-run", action="store_true", help="no GPU: see the module's docstring")
    p.add_argument("--table", type=Path, help="print the table of this time_to_pick.json and stop")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(json.loads(args.child))
    if args.table:
        print(table(json.loads(args.table.read_text())), end="")
        return 0
    if args.out is None:
        p.error("--out is needed")
    from launchtune.pipeline.errors import UserError

    began = time.perf_counter()
    signal.signal(signal.SIGTERM, _end_running)
    cases = parse_cases(args.cases)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        raise UserError(f"--seeds: {args.seeds!r} is not comma-separated integers") from None
    examples = [e for e in args.examples.split(",") if e.strip()]
    work = args.out / "runs"
    if work.exists():
        raise UserError(f"--out {args.out}: holds runs/ of an earlier run; give an empty folder")
    work.mkdir(parents=True)
    log_file = open(args.out / "run.log", "a")  # noqa: SIM115  (the whole run)

    def log(msg: str) -> None:
        line = f"{time.strftime('%H:%M:%S', time.gmtime())} {msg}"
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    import kernel_tuner

    data: dict[str, Any] = {
        "settings": {
            "cases": args.cases,
            "seeds": seeds,
            "lang": args.lang,
            "ours_strategy": args.ours_strategy,
            "kt_strategy": KT_STRATEGY,
            "kt_cap": args.kt_cap,
            "run_timeout": args.run_timeout,
            "deadline": args.deadline,
            "rounds": args.rounds,
            "repeats": args.repeats,
            "cache": args.cache,
            "dry_run": args.dry_run,
        },
        "kernel_tuner": kernel_tuner.__version__,
        "commit": _commit(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "examples": [],
        "runs": [],
    }
    device = args.out / "device.json"
    data["device"] = json.loads(device.read_text()) if device.is_file() else None
    if any(case == "heat" for case, _ in cases):
        data["heat_space"] = heat_space_sizes()
        log(f"heat: {data['heat_space']['launchtune']} configurations in both tools' spaces")

    def save() -> None:
        (args.out / "time_to_pick.json").write_text(json.dumps(data, indent=1, default=str))

    data["examples"] = run_examples(examples, work / "examples", args, log)
    save()
    for k, run in enumerate(plan_runs(cases, seeds)):
        left = args.deadline - (time.perf_counter() - began)
        if left < MIN_RUN_S:
            log(
                f"deadline: {run['tool']} {run['case']}@{run['budget']} seed {run['seed']} and the runs "
                "after it not run"
            )
            break
        folder = work / _folder_name(k, run)
        limit = min(args.run_timeout, left)
        ours = data["runs"][-1] if data["runs"] else {}
        if run["tool"] == KT and args.kt_cap > 0 and ours.get("call_s") is not None:
            if (ours["case"], ours["budget"], ours["seed"]) == (run["case"], run["budget"], run["seed"]):
                limit = min(limit, args.kt_cap * ours["call_s"] + KT_CAP_STARTUP_S)
        record = run_process(run, folder, args, limit)
        data["runs"].append(record)
        save()
        took = record.get("call_s", record.get("call_s_at_least"))
        log(f"{run['tool']} {run['case']}@{run['budget']} seed {run['seed']}: {record['status']}, "
            f"call {took} s, "
            f"pick {record.get('pick')} ({record.get('pick_value')})")  # fmt: skip
    specs = {}
    for case, _ in cases:
        for r, folder in ((r, work / _folder_name(i, r)) for i, r in enumerate(plan_runs(cases, seeds))):
            if r["case"] == case and r["tool"] == OURS and folder.is_dir() and (spec := _spec_of(folder)):
                specs[case] = spec
                break
    if args.dry_run:
        picks = sum(1 for r in data["runs"] if r.get("pick"))
        log(
            f"dry run: would re-measure {picks} picks of {', '.join(specs) or 'no case'} "
            f"({args.rounds} rounds)"
        )
    else:
        try:
            data["remeasure"] = remeasure(data["runs"], specs, args.rounds, args.repeats, log)
        except Exception:  # noqa: BLE001  (the runs' times are kept and tabled; the traceback said, exit 1)
            import traceback

            data["remeasure_error"] = traceback.format_exc()
            log(f"re-measure failed, the picks are not compared:\n{data['remeasure_error']}")
    data["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    save()
    text = table(data)
    (args.out / "table.md").write_text(text)
    log("\n" + text)
    log_file.close()
    if args.dry_run:
        from benchmarks.dry_run import done

        return done("benchmarks.time_to_pick", f"{len(data['runs'])} runs built their calls, table written")
    return 1 if "remeasure_error" in data else 0


def _folder_name(k: int, run: Mapping[str, Any]) -> str:
    return f"{k:02d}-{run['case']}-{run['budget']}-seed{run['seed']}-{run['tool']}"


def run_examples(names: list[str], out: Path, args: argparse.Namespace, log: Callable) -> list[dict]:
    """Kernel Tuner's examples through ``benchmarks.kernel_tuner_examples`` (each script with each tool, the
    import the only change, cold caches of its own); dry: each script found and its import changed."""
    from benchmarks.kernel_tuner_examples import NAMES, run_one, with_launchtune
    from launchtune.pipeline.errors import UserError

    rows = []
    for k, name in enumerate(names):
        if name not in NAMES:
            raise UserError(f"--examples: {name!r} is not one of {', '.join(NAMES)}")
        text = (EXAMPLES / f"{name}.py").read_text()
        if with_launchtune(text) == text:
            raise UserError(f"--examples: {name}.py does not import kernel_tuner as the wrapper expects")
        if args.dry_run:
            continue
        for tool in ("kt", "launchtune") if k % 2 == 0 else ("launchtune", "kt"):
            caches = out / f"{name}-{tool}-caches"
            env = {"CUPY_CACHE_DIR": str(caches / "cupy"), "TMPDIR": str(caches / "tmp")}
            for path in env.values():
                Path(path).mkdir(parents=True)
            row = run_one(name, tool, out, timeout_s=EXAMPLE_TIMEOUT_S, env=env)
            rows.append(row)
            log(f"example {name} {tool}: {row['seconds']} s, rc {row['rc']}")
    if args.dry_run and names:
        log(f"dry run: examples {', '.join(names)} found, their imports changed for launchtune")
    return rows


def _commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


if __name__ == "__main__":
    run_main(main)
