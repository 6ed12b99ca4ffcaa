"""How many training rows the surrogate MLP needs: its test scores against a cap on the rows of each class it
is fitted on, over several seeds, on a combined folder (issue 20: combine spent most of its time in MLP fits).

    python -m lab.fit_rows data/cfd/combined/sweep_paper --caps all,4000,2000,1000 --seeds 0,1,2,3,4 \
        --out data/cfd/combined/sweep_paper/fit_rows

Per cap and seed, the MLP of each class, the combined MLP (scored per class on the same test rows as
``launchtune train``: split seed fixed at the spec's) and the leave-one-class-out MLPs (trained on the
other classes, scored on every row of the held-out one), fitted as train fits them (``design.model_makers``,
one BLAS thread) but on at most ``cap`` training rows of each class (``design.capped``, drawn with the seed)
and with the MLP's random state = the seed. The seed-to-seed spread at ``all`` is what "measurable" means:
a cap whose mean score moves less than that changes nothing measurable. Writes ``curve.jsonl`` (one line per
cap and seed, CPU seconds per fit) and ``table.md`` (mean, SD, range per cap); ``--table`` redoes the table.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from launchtune.pipeline.learn.crossclass import scores
from launchtune.pipeline.learn.design import (
    capped,
    design,
    device_features,
    features_for,
    group_split,
    model_makers,
    training_rows,
)
from launchtune.pipeline.learn.models import one_thread
from launchtune.pipeline.store.folder import SweepFolder, ok_rows
from launchtune.pipeline.store.shards import load_merged

SCORES = ("r2", "spearman", "picked_over_best")


def one_seed(folder: Path, cap: int | None, seed: int) -> dict:
    spec, facts = SweepFolder(folder).read_spec()
    plan = dict(facts)
    frame, _ = training_rows(load_merged(folder), spec.train.max_rows, spec.seed)  # as train reads them
    rows_all = ok_rows(frame, None)
    classes = sorted(rows_all["gpu_class"].unique())
    device = device_features(rows_all)[0]
    rec: dict = {"cap": cap, "seed": seed}

    def mlp(n: int, combined: bool):
        return model_makers(replace(spec, seed=seed), n, combined)["mlp"]()

    for group in [*classes, "combined"]:
        t0 = time.process_time()
        cls = None if group == "combined" else group
        rows = ok_rows(frame, cls)
        feats = features_for(plan, False) + (device if cls is None else [])
        X, y = design(rows, feats), rows["total_ms"].to_numpy(float)
        tr, te = group_split(rows, spec.test_fraction, spec.seed)  # the test rows train scores on
        tr = capped(rows, tr, cap, seed)
        model = mlp(len(tr), cls is None).fit(X[tr], y[tr])
        of = rows["gpu_class"].to_numpy()[te]
        pred = model.predict(X[te])
        rec[group] = {c: scores(y[te][of == c], pred[of == c])["r2"] for c in classes if (of == c).sum() > 1}
        rec[group]["n_train"] = int(len(tr))
        rec[group]["cpu_s"] = round(time.process_time() - t0, 2)
    for held in classes:
        t0 = time.process_time()
        train = rows_all[rows_all["gpu_class"] != held].reset_index(drop=True)
        test = rows_all[rows_all["gpu_class"] == held]
        constant = [f for f in device if train[f].nunique(dropna=False) <= 1]  # as crossclass leaves them out
        used = [f for f in features_for(plan, False) + device if f not in constant]
        pos = capped(train, np.arange(len(train)), cap, seed)
        model = mlp(len(pos), True).fit(design(train, used)[pos], train["total_ms"].to_numpy(float)[pos])
        s = scores(test["total_ms"].to_numpy(float), model.predict(design(test, used)))
        rec[f"loco_{held}"] = {k: s[k] for k in SCORES} | {"n_train": int(len(pos))}
        rec[f"loco_{held}"]["cpu_s"] = round(time.process_time() - t0, 2)
    return rec


def table(records: list[dict]) -> str:
    caps = list(dict.fromkeys(r["cap"] for r in records))
    keys: list[tuple[str, str]] = []
    for r in records:
        for g, v in r.items():
            if isinstance(v, dict):
                keys += [(g, k) for k in v if k not in ("cpu_s", "n_train") and (g, k) not in keys]
    head = "| fit | score | " + " | ".join(f"cap {c or 'all'}" for c in caps) + " |"
    lines = [
        "Mean ± SD over seeds [min, max]; n seeds in the last row.",
        "",
        head,
        "| --- | --- |" + " ---: |" * len(caps),
    ]
    for g, k in keys:
        cells = []
        for c in caps:
            v = np.array([r[g][k] for r in records if r["cap"] == c and g in r and r[g].get(k) is not None])
            cells.append(
                f"{v.mean():.3f} ± {v.std(ddof=1):.3f} [{v.min():.3f}, {v.max():.3f}]" if len(v) > 1 else "-"
            )
        lines.append(f"| {g} | {k} | " + " | ".join(cells) + " |")
    for label, field in (("rows fitted (max over fits)", "n_train"), ("CPU s per seed, all fits", "cpu_s")):
        cells = []
        for c in caps:
            rs = [r for r in records if r["cap"] == c]
            vals = [sum(v[field] for v in r.values() if isinstance(v, dict)) for r in rs]
            if field == "n_train":
                vals = [max(v[field] for v in r.values() if isinstance(v, dict)) for r in rs]
            cells.append(f"{np.mean(vals):,.1f}" if field == "cpu_s" else f"{max(vals):,}")
        lines.append(f"| {label} | | " + " | ".join(cells) + " |")
    lines.append("| seeds | | " + " | ".join(str(sum(r["cap"] == c for r in records)) for c in caps) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, help="a trained or combined sweep folder (merged/, sweep.json)")
    p.add_argument("--caps", default="all,4000,2000", help="rows per class, comma-separated; all = no cap")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--out", type=Path, required=True, help="folder for curve.jsonl and table.md")
    p.add_argument("--table", action="store_true", help="only rewrite table.md from curve.jsonl")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    curve = args.out / "curve.jsonl"
    if not args.table:
        caps = [None if c == "all" else int(c) for c in args.caps.split(",")]
        with one_thread(), warnings.catch_warnings(), curve.open("a") as f:
            warnings.simplefilter("ignore")  # 200 epochs is the seed's budget: the MLP never "converges"
            for cap in caps:
                for seed in (int(s) for s in args.seeds.split(",")):
                    rec = one_seed(args.folder, cap, seed)
                    print(json.dumps(rec), file=f, flush=True)
                    print(f"cap {cap or 'all'} seed {seed}: done", flush=True)
    records = [json.loads(line) for line in curve.read_text().splitlines() if line.strip()]
    (args.out / "table.md").write_text(table(records))
    print((args.out / "table.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
