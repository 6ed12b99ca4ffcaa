"""report.md: the report's content (``report.json``, built by ``results.report``) as Markdown a newcomer
reads: the pick first (how sure it is, and against the default), then what was measured, then the models
that the sample supports; every figure in the objective's own unit (GFLOP/s for ``maximize: gflops``), its
time beside it.
"""

from __future__ import annotations

from typing import Any

from launchtune.kernels.objective import Objective, from_dict

# A model is shown where its sample supports it: fitted on at least this many rows per launch parameter, and
# explaining some of the held-out rows (R2 test above 0). Below that its predictions are noise that reads as
# knowledge; models/metrics.json keeps every fit. (docs/results.md states the rule.)
ROWS_PER_PARAMETER = 10


def supported(model: dict[str, Any], parameters: int | None) -> bool:
    """Whether a fitted model's sample supports it (``ROWS_PER_PARAMETER``, a positive held-out R2)."""
    rows, r2 = model.get("n_train"), model.get("r2_test")
    enough = rows is None or not parameters or rows >= ROWS_PER_PARAMETER * parameters
    return enough and r2 is not None and r2 > 0


def _goal(c: dict[str, Any]) -> Objective:
    return from_dict(c.get("objective"))


def _value(c: dict[str, Any], key: str, time_key: str | None = None, unit: bool = True) -> str:
    """A class's cost ``key`` in its objective's unit (``15.4 GFLOP/s``), its time ``time_key`` beside it
    where the objective is not time; ``unit=False``: the number alone, for a table whose header names it."""
    goal = _goal(c)
    value = goal.value(c.get(key))
    if value is None:
        return "n/a"
    text = f"{_fmt(float(value))} {goal.unit}" if unit else _fmt(float(value))
    if not goal.is_time and time_key and c.get(time_key) is not None:
        text += f" ({_fmt(c[time_key])} ms)"
    return text


def _numpy_note(cls: str, c: dict[str, Any]) -> str:
    """Why a CPU sweep's times do not rank launches: what the table's numbers are on the numpy backend."""
    times = [
        f"{what} {_value(c, key, time_key)}"
        for what, key, time_key in (
            ("best recorded", "best_sampled_ms", "best_sampled_time_ms"),
            ("default", "default_measured_ms", "default_time_ms"),
            ("predicted best", "predicted_best_measured_ms", "predicted_best_time_ms"),
        )
        if c.get(key) is not None
    ]
    return (
        f"**{cls}** ran on the numpy backend (a CPU), where launch parameters change nothing: every "
        "configuration does the same work, so the spread of its times"
        + (f" ({', '.join(times)})" if times else "")
        + " is this machine's timing noise (its load, caches, other jobs), not an effect of the launch, and "
        "the best recorded time can be slower than the default's. On a GPU (the CuPy backend) the same sweep "
        "measures what launches change."
    )


def _disagreement_sentence(cls: str, c: dict[str, Any], workers: int | None, repeats: int | None) -> str:
    """One sentence: the recorded and re-measured times disagree beyond their spread, why, and what ranks.
    The re-measured picks lead the report (the predicted best is the fastest re-measured candidate)."""
    (lo, hi), (a, b) = c["recorded_range_ms"], c["remeasured_range_ms"]
    side = "slower" if a > hi else "faster"
    same = c.get("recorded_over_remeasured")
    rows = f"; the same configurations took {_fmt(same, 3)}x as long recorded as re-measured" if same else ""
    at_once = f"{workers} workers" if workers and workers > 1 else "its worker"
    again = c.get("remeasure_repeats")
    how = (
        f" as the median of {repeats} repeats, the re-measurement of {again},"
        if repeats and again and repeats != again
        else ","
    )
    taken = (
        f"the sweep timed its samples{how} while {at_once} and the machine's other load competed for its "
        "cores, the re-measurement one configuration at a time after it"
    )
    if c.get("backend") == "numpy":
        why = (
            "the numpy backend ignores launch parameters, so the gap is the machine's state, not the "
            f"configuration: {taken}"
        )
    else:
        why = f"{taken}, so the two sets were not taken alike"
    return (
        f"**{cls}**: every re-measured time ({_fmt(a)}-{_fmt(b)} ms) is {side} than every time recorded "
        f"during the sweep ({_fmt(lo)}-{_fmt(hi)} ms){rows}, beyond either set's spread, because {why}; "
        "this report ranks configurations by the re-measured times."
    )


def _how_sure(c: dict[str, Any]) -> str:
    """How sure the pick is: a search's own estimate, or what the re-measurement against the default says."""
    if c.get("backend") == "numpy":
        return (
            "not at all on this backend: numpy ignores launch parameters, so which configuration measured "
            "fastest is this machine's timing noise (the note below)"
        )
    se = c.get("search")
    if se:
        text = (
            f"searched by `{se['strategy']}`, {se['measured']} of a budget of {se['budget']} measurements on "
            f"{se['workers']} worker(s), seed {se['seed']}; its pick was the best it measured "
            f"({_goal(c).show(se.get('best_ms'))} then), re-measured with the runners-up "
            "(figures/search_trace.png)"
        )
        if se.get("p_faster") is not None:
            text += (
                "; the chance that a configuration at least 5% better is still unmeasured: "
                f"{se['p_faster']:.2f} (at 0.1 or more a larger budget or another seed may pay; its "
                "calibration: docs/strategies.md)"
            )
        return text
    comp = c.get("comparison")
    text = f"chosen by the {c.get('search_model') or 'model'} among {c.get('ok', 0)} measured configurations"
    if comp:
        text += (
            f", then timed against the default in {comp.get('rounds', 'n/a')} interleaved rounds: the 95% "
            "interval above is how sure the gain is"
        )
    return text


def _pick_section(report: dict[str, Any]) -> list[str]:
    """Per class, first: the pick with its value, how sure it is, and the pick against the default."""
    lines: list[str] = ["## The pick", ""]
    for cls, c in report["classes"].items():
        goal = _goal(c)
        if not c.get("predicted_best_config") and c.get("best_sampled_config"):  # a pick not re-measured
            noise = f" How sure: {_how_sure(c)}." if c.get("backend") == "numpy" else ""
            lines += [
                f"**{cls}** ({goal.describe()}): the pick, the fastest of the {c.get('ok', 0)} "
                f"configurations measured, {_value(c, 'best_sampled_ms')}; not re-measured against the "
                f"default (`--remeasure` times the two in interleaved rounds).{noise}",
                "",
            ]
            lines += _config_table(c) + [""]
            continue
        if not c.get("predicted_best_config"):
            lines += [f"**{cls}**: no pick ({c.get('note') or 'nothing was re-measured'}).", ""]
            continue
        by = f"`{c['search']['strategy']}`" if c.get("search") else c.get("search_model") or "the model"
        lines += [
            f"**{cls}** ({goal.describe()}): the pick by {by}, re-measured, "
            f"{_value(c, 'predicted_best_measured_ms', 'predicted_best_time_ms')}; the default, re-measured, "
            f"{_value(c, 'default_measured_ms', 'default_time_ms')}; the pick against the default: "
            f"{c.get('speedup_text') or 'n/a'}. How sure: {_how_sure(c)}.",
            "",
        ]
        lines += _config_table(c)
        if c.get("predicted_best_skipped"):
            why = "; ".join(f"{s['status']}: {s['reason']}" for s in c["predicted_best_skipped"])
            lines += [
                "",
                f"Better-ranked candidates that could not run were skipped "
                f"({len(c['predicted_best_skipped'])}): {why}",
            ]
        lines += [""]
    return lines


def _class_details(report: dict[str, Any]) -> list[str]:
    """Where the rows came from (a combined folder), the time-energy picks."""
    lines: list[str] = []
    if report.get("combined_from"):
        lines += [
            "",
            "This folder combines sweeps measured elsewhere (`launchtune combine`); nothing was "
            "re-measured here: the predicted-best and default times are each source's own re-measurement "
            "(its own model's pick), from: "
            + ", ".join(f"{', '.join(s['classes'])} `{s['path']}`" for s in report["combined_from"])
            + ".",
        ]
    for cls, c in report["classes"].items():
        e = c.get("energy")
        if not e:
            continue

        def said(p: dict[str, Any]) -> str:
            cfg = ", ".join(f"{k}={v}" for k, v in p["config"].items())
            return f"{p['time_ms']:.4g} ms, {p['energy_mJ']:.4g} mJ ({cfg})"

        lines += [
            "",
            f"**{cls}** time and energy per launch ({e['rows']} configurations measured for both; "
            f"figures/energy_front.png): the pick under minimize time {said(e['time_pick'])}; under "
            f"minimize energy_mJ {said(e['energy_pick'])}; {len(e['front'])} on the Pareto front.",
        ]
    return lines


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _speedup_cell(c: dict[str, Any]) -> str:
    """The table's cell: the interleaved ratio and its verdict, never a bare ratio read as a gain."""
    comp = c.get("comparison")
    if c.get("backend") == "numpy":
        return "n/a (numpy ignores launches)"
    if c.get("pick_is_default"):
        return "n/a (the pick is the default)"
    if comp:
        return f"{comp['ratio']:.3f} [{comp['low']:.3f}, {comp['high']:.3f}] {comp['verdict']}"
    return "n/a"


def _config_table(c: dict[str, Any]) -> list[str]:
    """The launch parameters of the default, the best recorded and the predicted best configuration, one row
    per parameter, with each one's time last (ms)."""
    again = "re-measured"
    given = {
        "default": (c.get("default_config"), c.get("default_measured_ms"), again),
        "best recorded in the sweep": (c.get("best_sampled_config"), c.get("best_sampled_ms"), "recorded"),
        "predicted best": (c.get("predicted_best_config"), c.get("predicted_best_measured_ms"), again),
    }
    cols: dict[str, tuple[Any, Any, str]] = {k: v for k, v in given.items() if v[0]}
    params = list(dict.fromkeys(p for cfg, _, _ in cols.values() for p in cfg))
    lines = [
        "| parameter | " + " | ".join(cols) + " |",
        "| --- |" + " ---: |" * len(cols),
    ]
    for p in params:
        lines.append(f"| {p} | " + " | ".join(_fmt(cfg.get(p)) for cfg, _, _ in cols.values()) + " |")
    goal = _goal(c)
    if goal.is_time:
        lines.append(
            "| **time (ms)** | " + " | ".join(f"{_fmt(t)} {how}" for _, t, how in cols.values()) + " |"
        )
        return lines
    values = [goal.value(t) for _, t, _ in cols.values()]
    lines.append(
        f"| **{goal.unit}** | "
        + " | ".join(f"{_fmt(v)} {how}" for v, (_, _, how) in zip(values, cols.values(), strict=True))
        + " |"
    )
    times = {
        "default": c.get("default_time_ms"),
        "best recorded in the sweep": c.get("best_sampled_time_ms"),
        "predicted best": c.get("predicted_best_time_ms"),
    }
    lines.append("| time (ms) | " + " | ".join(_fmt(times[k]) for k in cols) + " |")
    return lines


def _models(report: dict[str, Any]) -> list[str]:
    """The models the sample supports (``supported``), and one line naming those left out and why."""
    parameters = report.get("parameters")
    shown: list[tuple[str, str, dict[str, Any]]] = []
    hidden: list[tuple[str, str, dict[str, Any]]] = []
    for group, models in report["models"].items():
        for name, m in models.items():
            (shown if supported(m, parameters) else hidden).append((group, name, m))
    lines = ["", "## Models (R2 on the held-out split)", ""]
    rule = (
        f"a model is shown where it was fitted on at least {ROWS_PER_PARAMETER} rows per launch parameter"
        + (f" ({ROWS_PER_PARAMETER * parameters} rows for {parameters})" if parameters else "")
        + " and explains some of the held-out rows (R2 test above 0); models/metrics.json keeps every fit"
    )
    if shown:
        lines += [
            "| group | model | rows fitted | R2 train | R2 test | MSE test (ms^2) |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for group, name, m in shown:
            lines.append(
                f"| {group} | {name} | {_fmt(m.get('n_train'))} | {_fmt(m['r2_train'], 3)} "
                f"| {_fmt(m['r2_test'], 3)} | {_fmt(m['mse_test'])} |"
            )
    if hidden:
        left = ", ".join(
            f"{group} {name} ({_fmt(m.get('n_train'))} rows, R2 test {_fmt(m.get('r2_test'), 3)})"
            for group, name, m in hidden
        )
        lines += ([""] if shown else []) + [f"Not shown, their sample does not support them: {left}: {rule}."]
    return lines


def render(report: dict[str, Any]) -> str:
    """report.md's text from the report's content (``report.json``)."""
    lines = [
        f"# Sweep `{report['sweep_id']}`",
        "",
        f"{report['workload']} / {report['case']} / {report['size']}, seed {report['seed']}, "
        f"created {report['created']}.",
        "",
    ]
    lines += _pick_section(report)
    lines += ["## What was measured", ""]
    # The count comes from the merged data, not from the measuring run's log: a sample lost between the two
    # must show here, never be reported as measured.
    lines += [f"Measured {report['merged_rows']} configurations (the merged data).", ""]
    if report.get("throughput"):
        t = report["throughput"]
        lines += [
            f"The last measuring run measured {t['rows']} in {t['seconds']:.1f} s on {t['workers']} "
            f"worker(s): {t['samples_per_minute']:.1f} samples per minute.",
            "",
        ]
    unit = (report.get("time_label") or "total time (ms)").removesuffix(" (ms)")
    goals = {_goal(c) for c in report["classes"].values()} or {from_dict(None)}
    goal = next(iter(goals)) if len(goals) == 1 else None
    stated = {g.describe() for g in goals} - {"minimize time"}
    if stated:
        lines += [
            f"Objective: {', '.join(sorted(stated))} (the workload's). Every configuration is ranked by it, "
            "and each value below is in its unit, its time (ms) beside it.",
            "",
        ]
    head = (
        f"({goal.unit})"
        if goal is not None and goal.is_time
        else (f"({goal.unit}; time in ms)" if goal is not None else "(each class's unit; time in ms)")
    )
    lines += [
        f"Times (ms) are each configuration's {unit}, the median of its repeats.",
        "",
        "| class | samples | ok | invalid | failed | search model "
        f"| best recorded in the sweep {head} | default, re-measured {head} "
        f"| predicted best, re-measured {head} | pick / default [95%] |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for cls, c in report["classes"].items():
        bare = goal is not None
        lines.append(
            f"| {cls} | {c['samples']} | {c['ok']} | {c['invalid']} | {c['failed']} "
            f"| {c.get('search_model') or 'n/a'} "
            f"| {_value(c, 'best_sampled_ms', 'best_sampled_time_ms', not bare)} "
            f"| {_value(c, 'default_measured_ms', 'default_time_ms', not bare)} "
            f"| {_value(c, 'predicted_best_measured_ms', 'predicted_best_time_ms', not bare)} "
            f"| {_speedup_cell(c)} |"
        )
    workers = (report.get("throughput") or {}).get("workers")
    repeats = (report.get("spec") or {}).get("repeats")
    for cls, c in report["classes"].items():
        if c.get("times_disagree"):
            lines += ["", _disagreement_sentence(cls, c, workers, repeats)]
        if c.get("backend") == "numpy":
            lines += ["", _numpy_note(cls, c)]
    lines += _models(report)
    lines += _class_details(report)
    lines += report.get("cross_class_md", [])
    if report.get("performance_report"):
        lines += [
            "",
            f"Dask performance report of the measuring run (task stream, profiles, worker use): "
            f"[{report['performance_report']}]({report['performance_report']}).",
        ]
    if report["figures"]:
        lines += ["", "## Figures", ""] + [f"![{f}](figures/{f})" for f in report["figures"]]
    return "\n".join(lines) + "\n"
