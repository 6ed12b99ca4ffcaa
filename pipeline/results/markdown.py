"""report.md: the report's content (``report.json``, built by ``results.report``) as Markdown a newcomer
reads: what was measured, what the models learnt, the pick against the default, with units on every number."""

from __future__ import annotations

from typing import Any


def _numpy_note(cls: str, c: dict[str, Any]) -> str:
    """Why a CPU sweep's times do not rank launches: what the table's numbers are on the numpy backend."""
    times = [
        f"{what} {_fmt(c.get(key))} ms"
        for what, key in (
            ("best recorded", "best_sampled_ms"),
            ("default", "default_measured_ms"),
            ("predicted best", "predicted_best_measured_ms"),
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


def _class_details(report: dict[str, Any]) -> list[str]:
    """Per class: the predicted best's configurations, a search's summary, the speed-up, where the rows came
    from (a combined folder), the time-energy picks."""
    lines: list[str] = []
    for cls, c in report["classes"].items():
        if c.get("predicted_best_config"):
            by = c["search_model"]
            lines += ["", f"**{cls}** configurations (the predicted best by {by}, re-measured):", ""]
            lines += _config_table(c)
            if c.get("predicted_best_skipped"):
                why = "; ".join(f"{s['status']}: {s['reason']}" for s in c["predicted_best_skipped"])
                lines += [
                    "",
                    f"Better-ranked candidates that could not run were skipped "
                    f"({len(c['predicted_best_skipped'])}): {why}",
                ]
        if c.get("search"):
            se = c["search"]
            lines += [
                "",
                f"**{cls}** searched by `{se['strategy']}`: {se['measured']} of a budget of {se['budget']} "
                f"measurements on {se['workers']} worker(s), seed {se['seed']}; its pick (the fastest it "
                f"measured, {_fmt(se['best_ms'])} ms then) re-measured with the runners-up above; the trace: "
                "figures/search_trace.png.",
            ]
            if se.get("p_faster") is not None:
                lines[-1] += (
                    " The search's estimate of the chance that a configuration at least 5% faster than its "
                    f"pick remains unmeasured: {se['p_faster']:.2f} (where it is high, a larger budget may "
                    "pay; its calibration: docs/strategies.md)."
                )
        if c.get("speedup_text"):
            lines += ["", f"**{cls}** predicted best against the default: {c['speedup_text']}."]
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
    lines.append("| **time (ms)** | " + " | ".join(f"{_fmt(t)} {how}" for _, t, how in cols.values()) + " |")
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
    lines += _pick_lines(report)
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
    held = (report.get("spec") or {}).get("test_fraction", 0.25)
    stated = {
        " ".join(f"{k} {v}" for k, v in (c.get("objective") or {}).items())
        for c in report["classes"].values()
    } - {"minimize time", ""}
    if stated:
        lines += [
            f"Objective: {', '.join(sorted(stated))} (the kernel spec's). Every configuration is ranked by "
            "it, and the 'ms' columns below hold its value (a maximised quantity: its reciprocal, so "
            "lower is better throughout).",
            "",
        ]
    lines += [
        f"Times (ms) are each configuration's {unit}, the median of its repeats; R2 and MSE are the "
        f"MLP's on the rows it trained on and on the held-out {held:.0%} (MSE in ms^2: its square root is a "
        "typical error in ms).",
        "",
        "| class | samples | ok | invalid | failed | MLP R2 train | MLP R2 test | MLP MSE test (ms^2) "
        "| search model | best recorded in the sweep (ms) | default, re-measured (ms) "
        "| predicted best, re-measured (ms) | pick / default time [95%] |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for cls, c in report["classes"].items():
        lines.append(
            f"| {cls} | {c['samples']} | {c['ok']} | {c['invalid']} | {c['failed']} "
            f"| {_fmt(c['r2_train'], 3)} "
            f"| {_fmt(c['r2_test'], 3)} | {_fmt(c['mse_test'])} | {c.get('search_model') or 'n/a'} "
            f"| {_fmt(c['best_sampled_ms'])} | {_fmt(c['default_measured_ms'])} "
            f"| {_fmt(c['predicted_best_measured_ms'])} | {_speedup_cell(c)} |"
        )
    workers = (report.get("throughput") or {}).get("workers")
    repeats = (report.get("spec") or {}).get("repeats")
    for cls, c in report["classes"].items():
        if c.get("times_disagree"):
            lines += ["", _disagreement_sentence(cls, c, workers, repeats)]
        if c.get("backend") == "numpy":
            lines += ["", _numpy_note(cls, c)]
    if report["models"]:
        lines += _model_lines(report)
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


def _pick_lines(report: dict[str, Any]) -> list[str]:
    """The pick of each class first (the tuning table's: re-measured where the sweep re-measured it, else
    the fastest configuration measured)."""
    lines = []
    for cls, pick in (report.get("picks") or {}).items():
        c = report["classes"].get(cls, {})
        how = "re-measured" if c.get("predicted_best_config") else "the fastest measured"
        config = ", ".join(f"{k}={v}" for k, v in (pick.get("best") or {}).items())
        lines.append(f"**Pick for {cls}**: {config} ({_fmt(pick.get('best_ms'))} ms, {how}).")
    return lines + ([""] if lines else [])


def _model_lines(report: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Models (R2 on the held-out split)",
        "",
        "| group | model | rows fitted | R2 train | R2 test | MSE test (ms^2) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for group, models in report["models"].items():
        for name, m in models.items():
            lines.append(
                f"| {group} | {name} | {_fmt(m.get('n_train'))} | {_fmt(m['r2_train'], 3)} "
                f"| {_fmt(m['r2_test'], 3)} | {_fmt(m['mse_test'])} |"
            )
    return lines
