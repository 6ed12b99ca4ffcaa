"""How well one model serves several GPU classes: combined vs per-class on the same test rows, and
leave-one-class-out.

**Same split** (the CFD seed's Figs. 12-14): for each class, its per-class model and the combined model are
scored on exactly that class's test rows (``train.group_split`` gives the combined model the union of the
classes' training rows), so a difference is the models', not the rows'.

**Leave one class out**: the combined model refitted on every class but one predicts all rows of the one left
out, the question being whether device facts carry a model to a GPU it has never seen. Absolute error says
little there (with one or two training classes the device facts are constant or nearly so, and nothing ties
their values to the time scale), so the rank scores are what to read: Spearman's rho between predicted and
measured time, and what the prediction would buy, the measured time of the held-out class's predicted-best
sampled configuration against that class's measured best. A pick within ``WITHIN`` (10%) of that best counts
as found; where a model's pick is not, ``why_not`` gives the reasons this data can show (a vendor or device
facts the training classes do not span, no training class whose best configuration comes within 10% on the
held-out one, a poor ranking).

**Pairs** (no model): for each two classes, Spearman's rho of their measured times on the configurations
both measured, and what one class's best configuration costs on the other (its time there over the other's
best): how much one GPU's tuning tells about another's before any model is fitted.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import percentileofscore, spearmanr
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import mean_squared_error, r2_score

from launchtune.kernels.device import CLASS_FEATURES, DEVICE_FEATURES

from ..store.folder import Metrics, ok_rows
from ..store.schema import cost_column
from ..store.spec import SweepSpec
from .design import MIN_ROWS, capped, design, model_makers, split
from .parallel import run_fits

Log = Callable[[str], None]

WITHIN = 1.10  # a pick within 10% of the held-out class's best counts as found
TOP_K = 10  # and with a few measurements on the held-out class: the best of the model's top ten


def scores(y: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    """R2 and MSE, rank correlation, and the measured time of the row predicted fastest against the best."""
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    finite = np.isfinite(pred)
    # an extrapolating log-target model can overflow exp(); rank what is there, score errors only if finite
    ranked = np.nan_to_num(pred, nan=np.inf)
    picked = float(y[int(np.argmin(ranked))])
    best = float(y.min())
    ok = bool(finite.all())
    varies = len(np.unique(ranked)) > 1
    rho = spearmanr(y, ranked).statistic if len(y) > 2 and varies else np.nan
    return {
        "n": int(len(y)),
        "r2": float(r2_score(y, pred)) if ok and len(y) > 1 else float("nan"),
        "mse": float(mean_squared_error(y, pred)) if ok else float("nan"),
        "non_finite_predictions": int((~finite).sum()),
        "spearman": float(rho),
        "picked_ms": picked,
        "best_ms": best,
        "picked_over_best": picked / best,
        # share of the rows measured faster than the pick (0: the pick is the best row)
        "picked_percentile": float(percentileofscore(y, picked, kind="strict")),
        "median_over_best": float(np.median(y)) / best,  # what a random pick gives, for scale
        # the fastest of the TOP_K rows predicted fastest: what measuring the model's top ten there buys
        "top_k_over_best": float(y[np.argsort(ranked, kind="stable")[:TOP_K]].min()) / best,
    }


def same_split(
    by_class: dict[str, pd.DataFrame],
    spec: SweepSpec,
    groups: dict[str, Any],
    trained: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Per class: the per-class and the combined models' scores on that class's test rows (``by_class``:
    each class's ok rows, ``folder.rows_by_class``)."""

    combined = trained.get("combined")
    if not combined:
        return {}
    out = {}
    for cls, rows in by_class.items():
        if cls not in trained:
            continue
        _, te = split(rows, spec.test_fraction, spec.seed)
        y = rows[cost_column(list(rows.columns))].to_numpy(float)[te]
        entry: dict[str, Any] = {"n_test": int(len(te)), "per_class": {}, "combined": {}}
        for side, group in (("per_class", cls), ("combined", "combined")):
            X = design(rows, groups[group]["features"])[te]
            for name, model in trained[group].items():
                entry[side][name] = scores(y, model.predict(X))
        out[cls] = entry
    return out


def _fit_and_score(
    spec: SweepSpec, name: str, X: np.ndarray, y: np.ndarray, Xh: np.ndarray, yh: np.ndarray
) -> dict[str, Any]:
    """One leave-one-class-out fit (run in a worker process): the model fitted on X, y, scored on Xh, yh."""
    from .models import one_thread

    t0 = time.perf_counter()
    with one_thread(), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # 200 epochs is the seed's budget, by design
        model = model_makers(spec, len(y), combined=True)[name]().fit(X, y)
        s = scores(yh, model.predict(Xh))
    # the keys the other groups use, so tables of both read alike
    return {
        "r2_test": s.pop("r2"),
        "mse_test": s.pop("mse"),
        **s,
        "n_train": int(len(y)),
        "fit_seconds": round(time.perf_counter() - t0, 3),
    }


def leave_one_class_out(
    rows: pd.DataFrame,
    spec: SweepSpec,
    features: list[str],
    device: list[str],
    log: Log,
    pairs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """For each class with enough rows: the combined models fitted on the other classes, scored on it.

    ``rows``: the ok rows of every class (``folder.ok_rows(frame, None)``). The fits are independent, so they
    run in parallel processes (``parallel.run_fits``); each fit is seeded and single-threaded, so the numbers
    are those of a serial run."""

    counts = rows["gpu_class"].value_counts()
    out: dict[str, Any] = {}
    jobs = []
    for held in sorted(counts.index):
        if counts[held] < MIN_ROWS:
            continue
        train, test = rows[rows["gpu_class"] != held], rows[rows["gpu_class"] == held]
        if len(train) < MIN_ROWS:
            continue
        # A device fact constant in training teaches nothing, and the held-out class's other value would sit
        # at an arbitrary distance from it after scaling (an MLP extrapolates that linearly): left out.
        constant = [f for f in device if train[f].nunique(dropna=False) <= 1]
        used = [f for f in features if f not in constant]
        cost = cost_column(list(train.columns))
        X, y = design(train, used), train[cost].to_numpy(float)
        Xh, yh = design(test, used), test[cost].to_numpy(float)
        entry: dict[str, Any] = {
            "trained_on": sorted(train["gpu_class"].unique()),
            "n_train": int(len(train)),
            "n_test": int(len(test)),
            "device_features": [f for f in device if f not in constant],
            "constant_in_training": constant,
            "models": {},
        }
        if constant and set(constant) == set(device):
            entry["note"] = (
                "one training class: every device feature is constant in training and left out, so the "
                "model is that class's launch-parameter model and predicts its times; the absolute error "
                "is the gap between the classes. Read the rank scores."
            )
        out[held] = entry
        for name in model_makers(spec, len(train), combined=True):
            pos = np.arange(len(train))
            if name == "mlp":  # at most train.loco_rows of each training class (a seeded draw)
                pos = capped(train, pos, spec.train.loco_rows, spec.seed)
            jobs.append((held, name, X[pos], y[pos], Xh, yh))
    results = run_fits(
        [(_fit_and_score, (spec, name, X, y, Xh, yh)) for _, name, X, y, Xh, yh in jobs],
        # cost: a row of the MLP's 200 epochs costs about 20 of boosting's (fit_seconds in metrics.json)
        sizes=[len(y) * (20 if name == "mlp" else 1) for _, name, _, y, _, _ in jobs],
        phases=["leave one class out"] * len(jobs),
    )
    for (held, name, *_), result in zip(jobs, results, strict=True):
        result["within_10pct"] = bool(result["picked_over_best"] <= WITHIN)
        result["top_k_within_10pct"] = bool(result["top_k_over_best"] <= WITHIN)
        out[held]["models"][name] = result
    for held, entry in out.items():
        if not all(m["within_10pct"] for m in entry["models"].values()):
            entry["why_not"] = why_not(rows, held, entry, pairs)
        log(
            f"leave out {held}: "
            + ", ".join(
                f"{n} R2 {m['r2_test']:.3g} rho {m['spearman']:.3g} pick/best {m['picked_over_best']:.3f}"
                for n, m in entry["models"].items()
            )
        )
    return out


def cross_class(
    ok: pd.DataFrame,
    by_class: dict[str, pd.DataFrame],
    spec: SweepSpec,
    groups: dict[str, Any],
    trained: dict[str, dict[str, Any]],
    log: Log,
    merged: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """``comparison`` and, with two classes or more, ``pairs`` (from ``merged``, every row of the folder,
    where given; else ``ok``) and ``loco`` for ``models/metrics.json``. ``ok``: the training rows that
    measured (``folder.ok_rows(frame, None)``), ``by_class`` the same per class (``folder.rows_by_class``)."""
    out: dict[str, Any] = {"comparison": same_split(by_class, spec, groups, trained)}
    entry = groups.get("combined", {})
    classes = [c for c in by_class if c in trained]
    if len(classes) >= 2:
        params = groups[classes[0]]["features"]
        out["pairs"] = class_pairs(ok if merged is None else merged, params)
    if "combined" in trained and len(classes) >= 2:
        device = [f for f in entry["features"] if f not in groups[classes[0]]["features"]]
        out["loco"] = leave_one_class_out(ok, spec, entry["features"], device, log, out["pairs"])
    return out


def class_pairs(frame: pd.DataFrame, params: list[str]) -> dict[str, Any]:
    """For each class A and each other class B: Spearman's rho of A's and B's times on the configurations
    both measured, and what B's best configuration costs on A (A's time of it over A's best; null where A
    has no ok row of it, with the reason: it did not run on A, or A never measured it). Configurations
    measured more than once count with their median."""
    rows = ok_rows(frame, None)
    times = rows.groupby(["gpu_class", *params], sort=True)[cost_column(list(rows.columns))].median()
    per_class = {c: t.droplevel(0) for c, t in times.groupby(level=0)}
    failed = frame[frame["status"] != "ok"]
    status = {  # what a class recorded of a configuration it has no ok row of
        (c, tuple(key)): f"{state} on {c}"
        for (c, *key), state in zip(
            failed[["gpu_class", *params]].itertuples(index=False, name=None), failed["status"], strict=True
        )
    }
    out: dict[str, Any] = {}
    for a, ta in per_class.items():
        out[a] = {}
        for b, tb in per_class.items():
            if a == b:
                continue
            shared = ta.index.intersection(tb.index)
            rho = spearmanr(ta[shared], tb[shared]).statistic if len(shared) > 2 else np.nan
            best_b = tb.idxmin()
            entry: dict[str, Any] = {
                "shared": int(len(shared)),
                "spearman": float(rho),
                "best_of_other": dict(zip(params, map(int, np.atleast_1d(best_b)), strict=True)),
            }
            if best_b in ta.index:
                entry["best_of_other_ratio"] = float(ta[best_b] / ta.min())
            else:
                entry["best_of_other_ratio"] = None
                key = best_b if isinstance(best_b, tuple) else (best_b,)
                entry["best_of_other_note"] = status.get((a, key), f"not measured on {a}")
            out[a][b] = entry
    return out


def why_not(rows: pd.DataFrame, held: str, entry: dict[str, Any], pairs: dict[str, Any] | None) -> str:
    """Why a model fitted on the other classes may miss the held-out class's optimum, from what the data
    shows: a vendor no training class has, device facts outside the training classes' range, no training
    class whose best configuration is within 10% of the held-out class's optimum there, a poor ranking."""
    reasons = []
    trained_on = entry["trained_on"]
    facts = rows.drop_duplicates("gpu_class").set_index("gpu_class")
    for vendor in ("nvidia", "amd"):
        col = f"vendor_{vendor}"
        if col in facts and facts.at[held, col] == 1 and not (facts.loc[trained_on, col] == 1).any():
            reasons.append(f"vendor unseen in training ({vendor})")
    outside = []
    for f in entry["device_features"]:
        if f.startswith("vendor_"):
            continue
        lo, hi, v = facts.loc[trained_on, f].min(), facts.loc[trained_on, f].max(), facts.at[held, f]
        if v < lo or v > hi:
            outside.append(f"{f} {v:g} outside [{lo:g}, {hi:g}]")
    if outside:
        reasons.append("device facts outside training: " + ", ".join(outside))
    # what each training class's best configuration costs on the held-out class: where none comes within
    # 10%, a model that learned the training classes well still has no good configuration to point at
    costs = {c: (pairs or {}).get(held, {}).get(c, {}).get("best_of_other_ratio") for c in trained_on}
    known = {c: r for c, r in costs.items() if r is not None}
    if known and min(known.values()) > WITHIN:
        c = min(known, key=lambda k: known[k])
        reasons.append(
            f"no training GPU's best configuration is within 10% on it (the closest, {c}'s, costs "
            f"{known[c]:.2f}x)"
        )
    rhos = [m["spearman"] for m in entry["models"].values() if not m["within_10pct"]]
    if not reasons:
        rho = min(rhos) if rhos else float("nan")
        reasons.append(f"the model's ranking misses the top (rho {rho:.2f})")
    return "; ".join(reasons)


def markdown(metrics: Metrics) -> list[str]:
    """The report's sections on the comparison and on leave-one-class-out (empty where there is neither)."""

    def f(x: Any, digits: int = 3) -> str:
        return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}g}"

    lines: list[str] = []
    comparison = metrics.get("comparison") or {}
    combined = metrics.get("groups", {}).get("combined", {})
    if comparison and len(comparison) > 1:
        device = [x for x in combined.get("features", []) if x in DEVICE_FEATURES + CLASS_FEATURES]
        lines += [
            "",
            "## Combined vs per-class on the same test rows",
            "",
            f"The combined model (launch parameters + {', '.join(device)}; target "
            f"{combined.get('target', 'ms')}) against each class's own model, on that class's test rows only "
            "(each class split on its own with the same seed). Read this table, not the combined group's R2 "
            "over all classes above: in milliseconds that one is dominated by the slowest class's spread.",
        ]
        if combined.get("dropped_features"):
            lines.append(
                "Left out of the combined fit: "
                + "; ".join(f"{k} ({v})" for k, v in combined["dropped_features"].items())
                + "."
            )
        lines += [
            "",
            "| class | model | test rows | R2 per-class | R2 combined | MSE per-class | MSE combined "
            "| rho per-class | rho combined |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for cls, c in comparison.items():
            for name in c["combined"]:
                a, b = c["per_class"].get(name, {}), c["combined"][name]
                lines.append(
                    f"| {cls} | {name} | {c['n_test']} | {f(a.get('r2'))} | {f(b['r2'])} "
                    f"| {f(a.get('mse'), 4)} | {f(b['mse'], 4)} "
                    f"| {f(a.get('spearman'))} | {f(b['spearman'])} |"
                )
    loco = metrics.get("loco") or {}
    if loco:
        lines += [
            "",
            "## Leave one class out",
            "",
            "The combined model refitted without the held-out class, predicting every ok row of it. "
            "`pick/best`: measured time of the row it predicts fastest over the class's measured best "
            "(1 = found the best); `pick %`: share of rows measured faster than the pick; `median/best`: a "
            "random pick, for scale. `fit rows`: the rows the refitted model saw (the MLP a seeded draw of "
            "at most `train.loco_rows` of each training class; its scores here vary more with the seed than "
            "with that cap).",
            "",
            "| held out | trained on | model | fit rows | rows | R2 | MSE | rho | pick ms | best ms "
            "| pick/best | within 10% | pick % | median/best |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
        ]
        notes = []
        for held, e in loco.items():
            for name, m in e["models"].items():
                within = m.get("within_10pct")
                lines.append(
                    f"| {held} | {', '.join(e['trained_on'])} | {name} | {m.get('n_train', e['n_train'])} "
                    f"| {e['n_test']} | {f(m['r2_test'])} "
                    f"| {f(m['mse_test'], 4)} | {f(m['spearman'])} | {f(m['picked_ms'], 4)} "
                    f"| {f(m['best_ms'], 4)} | {f(m['picked_over_best'], 4)} "
                    f"| {'n/a' if within is None else ('yes' if within else 'no')} "
                    f"| {f(m['picked_percentile'], 3)} | {f(m['median_over_best'], 4)} |"
                )
            if e.get("note"):
                notes.append(f"- {held} held out: {e['note']}")
        if notes:
            lines += ["", *notes]
        lines += loco_summary(loco)
    lines += pairs_markdown(metrics.get("pairs") or {})
    return lines


def loco_summary(loco: dict[str, Any]) -> list[str]:
    """One row per held-out class: R2, rho and pick/best of each model, whether each pick is within 10% of
    the class's best, and where one is not, why (``why_not``)."""
    names = sorted({n for e in loco.values() for n in e["models"]})
    if not loco or not names:
        return []
    found = sum(any(e["models"][n]["within_10pct"] for n in e["models"]) for e in loco.values())
    with_k = sum(any(e["models"][n].get("top_k_within_10pct") for n in e["models"]) for e in loco.values())
    has_k = any("top_k_over_best" in m for e in loco.values() for m in e["models"].values())
    lines = [
        "",
        "### Leave one GPU out: is the pick within 10% of the held-out GPU's optimum?",
        "",
        f"Found (by at least one model) for {found} of {len(loco)} held-out classes.",
    ]
    if has_k:
        lines.append(
            f"With the model's {TOP_K} best-ranked configurations measured on the held-out GPU ({TOP_K} "
            f"measurements; `top {TOP_K}/best`: the fastest of them over the optimum): {with_k} of "
            f"{len(loco)}."
        )
    k_head = f" | {{n}} top {TOP_K}/best" if has_k else ""
    lines += [
        "",
        "| held out | "
        + " | ".join(f"{n} R2 | {n} rho | {n} pick/best | {n} within 10%" + k_head.format(n=n) for n in names)
        + " | why not |",
        "| --- | "
        + " | ".join("---: | ---: | ---: | ---" + (" | ---:" if has_k else "") for _ in names)
        + " | --- |",
    ]
    for held, e in loco.items():
        cells = []
        for n in names:
            m = e["models"].get(n)
            if m is None:
                cells.append("n/a | n/a | n/a | n/a" + (" | n/a" if has_k else ""))
                continue
            cells.append(
                f"{_num(m['r2_test'])} | {_num(m['spearman'])} | {_num(m['picked_over_best'], 4)} "
                f"| {'yes' if m['within_10pct'] else 'no'}"
                + (f" | {_num(m.get('top_k_over_best'), 4)}" if has_k else "")
            )
        lines.append(f"| {held} | " + " | ".join(cells) + f" | {e.get('why_not', '')} |")
    return lines


def pairs_markdown(pairs: dict[str, Any]) -> list[str]:
    """The two class-by-class tables of ``class_pairs``: rank agreement, and one class's best on another."""
    classes = sorted(pairs)
    if len(classes) < 2:
        return []

    def table(cell: Any) -> list[str]:
        rows = ["| class | " + " | ".join(classes) + " |", "| --- |" + " ---: |" * len(classes)]
        for a in classes:
            rows.append(
                f"| {a} | " + " | ".join("-" if a == b else cell(pairs[a][b]) for b in classes) + " |"
            )
        return rows

    def cost(p: dict[str, Any]) -> str:
        if p["best_of_other_ratio"] is None:
            return p.get("best_of_other_note", "n/a")
        return _num(p["best_of_other_ratio"], 4)

    return [
        "",
        "## GPU against GPU (measured times, no model)",
        "",
        "Spearman's rho of the row class's times against the column class's, on the configurations both "
        "measured (each configuration's median):",
        "",
        *table(lambda p: f"{_num(p['spearman'])} ({p['shared']})"),
        "",
        "What the column class's best configuration costs on the row class: its time there over the row "
        "class's best (1 = the same optimum):",
        "",
        *table(cost),
    ]


def _num(x: Any, digits: int = 3) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{digits}g}"
