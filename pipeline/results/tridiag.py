"""Tridiagonal stream measurements (``data/tridiag/<class>/``: ``streams.csv``, ``baselines.csv``,
``meta.json``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import UserError
from ..jsonio import read_json
from ..streams.model import SEED_TAU_MS, denoise_host, evaluate, load_dataset, tables


@dataclass
class Tridiag:
    """One GPU's tridiagonal measurements: (size, streams) times, baselines, meta and the stream models."""

    path: Path
    data: pd.DataFrame
    baselines: pd.DataFrame | None
    meta: dict[str, Any]
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # a model that could not be fitted, and why

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        return str((self.meta.get("device") or {}).get("gpu_class") or self.name)

    @property
    def can_denoise(self) -> bool:
        """The stage spans are there, so the host stage can be replaced by its median."""
        return {"stage1_span", "stage3_span"} <= set(self.data.columns)


def tridiag_folders(results: str | Path) -> list[Path]:
    """Every folder under ``results`` holding a ``streams.csv`` (``data/tridiag/<class>/``), sorted."""
    return sorted({p.parent for p in Path(results).rglob("streams.csv")})


def load_tridiag(path: str | Path) -> Tridiag:
    """Read a folder of ``benchmarks/tridiag_streams.py`` and fit the stream models to it with
    ``pipeline.streams.model`` (half a second): on the raw end-to-end times and, where the stage spans are
    there, on the host-denoised ones. Fitted rather than read from ``model_raw/``, which could be older than
    the data; with the same data, seed and tau the result is the stored one."""

    path = Path(path)
    data = load_dataset(path / "streams.csv")
    meta = read_json(path / "meta.json") or {}
    base = path / "baselines.csv"
    baselines = pd.read_csv(base) if base.is_file() else None
    tau_ms = meta.get("tau_ms")
    tau = tau_ms if isinstance(tau_ms, int | float) else SEED_TAU_MS
    models, skipped = {}, {}
    for which in ("raw", "denoised"):
        try:
            df = data if which == "raw" else denoise_host(data, str(path))
            models[which] = evaluate(df, tau_ms=tau, source=str(path))
        except UserError as exc:  # too few sizes for the splits, or no spans to denoise
            skipped[which] = str(exc)
    return Tridiag(path=path, data=data, baselines=baselines, meta=meta, models=models, skipped=skipped)


def load_tridiags(results: str | Path) -> list[Tridiag]:
    folders = tridiag_folders(results)
    if not folders:
        raise UserError(f"{results}: no tridiagonal measurements (a folder holding streams.csv)")
    return [load_tridiag(p) for p in folders]


def stream_times(td: Tridiag, denoised: bool = False) -> pd.DataFrame:
    """Median end-to-end time per (size, streams); ``denoised`` rebuilds it without the host-stage jumps."""

    df = denoise_host(td.data, str(td.path)) if denoised else td.data
    return tables(df, str(td.path))[1][["size", "streams", "total_ms"]]


def optimum_table(td: Tridiag, which: str = "raw") -> pd.DataFrame:
    """The seed's table: per size the measured best stream count against the seed model's and ours, and the
    time each prediction loses over the measured best (%)."""
    if which not in td.models:
        raise UserError(f"{td.path}: no {which} stream model ({td.skipped.get(which, 'not fitted')})")
    table = pd.DataFrame(td.models[which]["table"])
    return table[
        [
            "size",
            "best_streams",
            "best_ms",
            "one_stream_ms",
            "gomez_luna",
            "seed_streams",
            "seed_lost_pct",
            "ours_streams",
            "ours_lost_pct",
            "ours_split",
        ]
    ]


def stream_speedups(td: Tridiag, denoised: bool = False) -> pd.DataFrame:
    """Per size: the best stream count's time, and its speed-up over one stream and over cuSPARSE gtsv2 (with
    the same transfers; both its pivoting and non-pivoting variants where measured)."""
    times = stream_times(td, denoised)
    best = times.loc[times.groupby("size")["total_ms"].idxmin()].set_index("size")
    one = times[times["streams"] == 1].set_index("size")["total_ms"]
    out = pd.DataFrame(
        {"best_streams": best["streams"].astype(int), "best_ms": best["total_ms"], "one_stream_ms": one}
    )
    out["over_one_stream"] = out["one_stream_ms"] / out["best_ms"]
    if td.baselines is not None:
        b = td.baselines.set_index("size")
        for col, name in (("gtsv2_ms", "over_gtsv2"), ("gtsv2_nopivot_ms", "over_gtsv2_nopivot")):
            if col in b:
                out[col] = b[col].reindex(out.index)
                out[name] = out[col] / out["best_ms"]
    return out.reset_index()
