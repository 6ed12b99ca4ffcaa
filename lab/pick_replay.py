"""How far the surrogate's pick is from the best recorded row, replayed on a sweep folder without a device
(issue 16: the fused sweep's predicted best was a configuration the sweep had recorded as invalid).

    python -m lab.pick_replay data/cfd/h100/sweep_fused data/cfd/h200/sweep_fused \
        --out data/cfd/combined/pick_replay

Per class: the search model (``metrics.json``'s ``search_model``, refitted as ``launchtune train``
fits it: same rows, same seeded split, one BLAS thread) predicts every recorded row of the class; the pick is
``pipeline.learn.pick.predicted_pick`` over (a) all rows and (b) the held-out rows only (the test split of the
ok rows plus every invalid or failed row, none of which the model was fitted on). The sweep's own re-measure
ranks a pool of unmeasured configurations instead, which only a device can time; the replay ranks what was
measured. Writes ``replay.json`` and ``table.md``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from launchtune.pipeline.learn.design import design, group_split, model_makers, training_rows
from launchtune.pipeline.learn.models import one_thread
from launchtune.pipeline.learn.pick import predicted_pick
from launchtune.pipeline.store.folder import SweepFolder
from launchtune.pipeline.store.shards import load_merged


def inactive_zeroed(rows: pd.DataFrame, params: list[str]) -> pd.DataFrame:
    """The fused space's parameters a level does not use set to 0 (an experiment on the features only; the
    rows keep their recorded values): the seven kernels' launches where ``fusion`` > 0, ``tile.*`` where it is
    0, ``tile.smem``/``tile.faces`` at the directional level (one variant per register cap serves it)."""
    if "fusion" not in params:
        return rows
    out = rows.copy()
    fusion = out["fusion"].to_numpy()
    launch = [p for p in params if p.endswith((".blocks", ".threads")) and not p.startswith("tile.")]
    tile = [p for p in params if p.startswith("tile.")]
    out.loc[fusion != 0, launch] = 0
    out.loc[fusion == 0, tile] = 0
    out.loc[fusion == 1, [p for p in ("tile.smem", "tile.faces") if p in params]] = 0
    return out


def replay_class(sweep_dir: Path, cls: str, top_k: int, zero_inactive: bool = False) -> dict[str, Any]:
    folder = SweepFolder(sweep_dir)
    spec, plan = folder.read_spec()
    params = list(plan["params"])
    merged = load_merged(sweep_dir)
    metrics = folder.read_metrics() or {}
    name = metrics.get("groups", {}).get(cls, {}).get("search_model") or "gbr"
    frame, _ = training_rows(merged[merged["gpu_class"] == cls], spec.train.max_rows, spec.seed)
    tr, te = group_split(frame, spec.test_fraction, spec.seed)
    model = model_makers(spec, len(tr), False)[name]()

    def X(rows: pd.DataFrame) -> np.ndarray:
        return design(inactive_zeroed(rows, params) if zero_inactive else rows, params)

    with one_thread():
        model.fit(X(frame)[tr], frame["total_ms"].to_numpy(float)[tr])
    rows = merged[merged["gpu_class"] == cls].reset_index(drop=True)
    failing = rows[rows["status"] != "ok"]
    held_out = pd.concat([frame.iloc[te], failing], ignore_index=True)
    out: dict[str, Any] = {"sweep": str(sweep_dir), "gpu_class": cls, "model": name, "seed": spec.seed}
    out["features"] = "inactive parameters zeroed" if zero_inactive else "as recorded"
    for label, part in (("all_rows", rows), ("held_out", held_out)):
        out[label] = predicted_pick(part, model.predict(X(part)), params, top_k)
    test_y = frame["total_ms"].to_numpy(float)[te]
    out["r2_test"] = float(model.score(X(frame)[te], test_y))  # as recorded: equals metrics.json's
    out["best_row_ms"] = float(rows.loc[rows["status"] == "ok", "total_ms"].min())
    pick = out["held_out"]["pick"]
    out["held_out"]["pick_over_best_row"] = pick["ms"] / out["best_row_ms"] if pick else None
    return out


def _fmt(x: float | None, pattern: str = "{:.3f}") -> str:
    return "-" if x is None else pattern.format(x)


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| class | model | features | R2 test | rows | failing rows | unrestricted pick | skipped | pick ms "
        "| best row ms | pick / best | best of top 5 / best | held out: skipped | pick / best held-out row "
        "| pick / best row |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        a, h = r["all_rows"], r["held_out"]
        lines.append(
            f"| {r['gpu_class']} | {r['model']} | {r['features']} | {r['r2_test']:.3f} | {a['rows']} "
            f"| {a['known_failures']} "
            f"| {a['unrestricted']['status']} | {a['skipped']} "
            f"| {_fmt(a['pick']['ms'] if a['pick'] else None)} | {_fmt(a['best_ms'])} "
            f"| {_fmt(a['pick_over_best'])}x | {_fmt(a['top_k_over_best'])}x "
            f"| {h['skipped']} | {_fmt(h['pick_over_best'])}x | {_fmt(h['pick_over_best_row'])}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweeps", nargs="+", type=Path, help="sweep folders with merged/ and sweep.json")
    ap.add_argument("--out", type=Path, required=True, help="folder for replay.json and table.md")
    ap.add_argument("--top-k", type=int, default=5)
    args = ap.parse_args(argv)
    results = []
    for sweep in args.sweeps:
        for cls in sorted(load_merged(sweep)["gpu_class"].unique()):
            for zero in (False, True):
                results.append(replay_class(sweep, str(cls), args.top_k, zero))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "replay.json").write_text(json.dumps(results, indent=1, default=_np) + "\n")
    (args.out / "table.md").write_text(table(results))
    print(table(results), end="")


def _np(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON")


if __name__ == "__main__":
    main()
