"""Which number of CUDA streams is best for the tridiagonal partition solver, from the system size alone.

The seed's models (Veneva & Imamura, 2024), re-fitted on our measurements:

* the stream-time model ``T_str = T1_H2D + (T1_COMP + T1_D2H + T3_H2D + T3_COMP) / k + T2_H + T3_D2H +
T_overhead``,
  whose overlappable part is ``sum = T1_COMP + T1_D2H + T3_H2D + T3_COMP`` (one-stream stage times);
* the Gomez-Luna estimate ``k_opt = sqrt(sum / tau)``, tau = the time to create one stream;
* a linear regression ``sum ~ size`` (3:1 shuffled split);
* ``T_overhead = (T_str - T_non_str) + (k - 1) / k * sum`` measured, and two ``curve_fit`` models of it:
  small sizes (<= 1e6) ``alpha * size + beta * log10(k) + gamma``, big sizes ``(alpha * size + beta) *
  log2(k^(4/3)) + gamma``;
* the optimum-streams rule: among the k whose predicted overhead is below the predicted saving
  ``(k - 1) / k * sum``, the one with the largest margin (1 stream if none).

The SPIKE pipeline (``copies = spike``, stage 2 on the device; issue 21) fits the same model with other stages
behind the names (``kernels.tridiag.workload.spike_stage_times``): every upload in order on one stream, each
chunk reduced (stage 1 and its slices' spikes) as soon as it is up, the top system solved on the device after
the last chunk's reduction, then each chunk's way back (its slices' interface values and stage 3) and its
download in order. The uploads overlap the reductions and the downloads the ways back, so ``T1_H2D`` (all
uploads), ``T2_H`` (the top solve) and ``T3_D2H`` (all downloads) stay whole while only the last chunk's
reduction and the first chunk's way back are on the critical path: its overlappable part is ``sum = T1_COMP +
T3_COMP``, with ``T1_D2H = T3_H2D = 0`` since no interface rows cross the bus (``SUM_STAGES`` holds as it is).

Ours: a gradient-boosting regressor of ``log(T(k) / T(1))`` on ``(log10 size, log2 k)``, trained on 3/4 of the
sizes (shuffled, whole sizes held out so a test size is never seen at any k); its predicted best is the k with
the smallest predicted ratio. Both are judged by the measured time of the stream count they pick.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import curve_fit
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import LinearRegression
from sklearn.metrics import mean_squared_error, r2_score
from sklearn.model_selection import train_test_split

from launchtune.kernels.atomic import write_text
from launchtune.kernels.tridiag.system import COPY_CHOICES, STAGE2_CHOICES

from ..errors import UserError

STAGES = ("t1_h2d", "t1_comp", "t1_d2h", "t2_host", "t3_h2d", "t3_comp", "t3_d2h")
SUM_STAGES = ("t1_comp", "t1_d2h", "t3_h2d", "t3_comp")
STREAMS = (1, 2, 4, 8, 16, 32)
SMALL_MAX = 1_000_000  # the seed's split between the "small" and "big" overhead models
SEED_TAU_MS = 0.004448  # the seed's tau on an RTX 2080 Ti, used when the dataset carries none
WITHIN = 0.02  # a prediction "within 2%" costs at most 2% over the measured best


# -- data ----------------------------------------------------------------------------------------------------
def load_dataset(
    path: str | Path,
    threads: int | None = None,
    m: int | None = None,
    stage2: str | None = None,
    copies: str | None = None,
) -> pd.DataFrame:
    """Rows (size, streams, total_ms, one-stream stage times) from our CSV or a merged sweep's Parquet.

    Accepts ``benchmarks/tridiag_streams.py``'s ``streams.csv`` and the pipeline's shards (stage columns named
    ``ms.<stage>``, ``status`` column; ``stage2`` and ``copies`` as indices into their choices, named here).
    One pipeline is modelled at a time: with a ``copies`` column, keeps ``copies`` (default ``spike`` where
    present, the fastest); with a ``stage2`` column (stage 2 on the host or the device, issue 21), ``stage2``
    (default ``gpu`` where present). A default picks among the rows that the other, asked-for one left. With
    several (threads, m) in the data, keeps the seed's 256 / 10 unless told otherwise, and with several
    ``ends`` the equal chunks (100).
    """
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such file or folder")
    try:
        if path.is_dir() or path.suffix in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        elif path.suffix == ".csv":
            df = pd.read_csv(path)
        else:
            raise UserError(f"{path}: expected a .csv file or a Parquet file or folder")
    except UserError:
        raise
    except Exception as exc:  # pyarrow / pandas parse errors: a corrupt or foreign file
        raise UserError(f"{path}: cannot read the dataset ({type(exc).__name__}: {exc})") from None
    df = df.rename(columns={f"ms.{s}": s for s in STAGES})
    if "status" in df.columns:
        df = df[df["status"] == "ok"]
    if "workload" in df.columns and (df["workload"] != "tridiag").any():
        df = df[df["workload"] == "tridiag"]
    missing = [c for c in ("size", "streams", "total_ms", *STAGES) if c not in df.columns]
    if missing:
        raise UserError(
            f"{path}: missing column {missing[0]!r} (need size, streams, total_ms and the stage times)"
        )
    try:
        df = df.assign(
            size=pd.to_numeric(df["size"]).astype(np.int64), streams=df["streams"].astype(np.int64)
        )
    except (ValueError, TypeError):
        raise UserError(
            f"{path}: column 'size' or 'streams' holds something other than whole numbers"
        ) from None
    if copies is not None and "copies" not in df.columns:  # measured before the column: the seed's pipeline
        df = df.assign(copies="streams")
    pipeline = (("copies", copies, "spike", COPY_CHOICES), ("stage2", stage2, "gpu", STAGE2_CHOICES))
    # what was asked for first, so that a default picks among the rows left (--stage2 host: copies streams)
    for name, wanted, preferred, choices in sorted(pipeline, key=lambda p: p[1] is None):
        if name in df.columns:
            df = _keep_choice(df, name, wanted, preferred, choices, path)
    for column, asked, default in (("threads", threads, 256), ("m", m, 10), ("ends", None, 100)):
        if column in df.columns and df[column].nunique() > 1:
            pick = asked if asked is not None else default
            if pick not in set(df[column]):
                pick = int(df[column].mode().iloc[0])
            df = df[df[column] == pick]
    if df.empty:
        raise UserError(f"{path}: no usable rows (status ok, tridiag)")
    bad = sorted(set(df["streams"]) - set(STREAMS))
    if bad:
        raise UserError(f"{path}: streams: {bad[0]} is not a power of two from 1 to 32")
    if not np.isfinite(df[["total_ms", *STAGES]].to_numpy(dtype=float)).all():
        raise UserError(f"{path}: total_ms or a stage time is missing or not finite")
    return df.reset_index(drop=True)


def _keep_choice(
    df: pd.DataFrame, name: str, wanted: str | None, preferred: str, choices: tuple[str, ...], path: Path
) -> pd.DataFrame:
    """The rows whose column ``name`` is ``wanted`` (default ``preferred`` where present, else the commonest),
    the column by name: a sweep stores the index into ``choices`` (numeric, for the surrogates)."""
    if df.empty:  # nothing ok: load_dataset says so
        return df
    if pd.api.types.is_numeric_dtype(df[name]):
        codes = set(df[name])
        bad = sorted(c for c in codes if c not in range(len(choices)))
        if bad:
            listed = ", ".join(f"{i} ({c})" for i, c in enumerate(choices))
            raise UserError(f"{path}: {name} code {bad[0]} is not one of {listed}")
        df = df.assign(**{name: [choices[int(c)] for c in df[name]]})
    there = set(df[name])
    pick = wanted or (preferred if preferred in there else str(df[name].mode().iloc[0]))
    if pick not in there:
        raise UserError(f"{path}: no rows with {name} = {pick!r} (there: {sorted(there)})")
    return df[df[name] == pick]


def denoise_host(df: pd.DataFrame, source: str = "dataset") -> pd.DataFrame:
    """Replace each end-to-end time by ``stage1_span + stage3_span + median one-stream t2_host`` of its size.

    The host stage does the same work whatever the stream count, so where its time jumps between runs (seen on
    the lent H100 VM: 0.5 ms or 15 ms at 10^6 unknowns) the jumps are noise that would decide the "best"
    stream count. Optional, and said so in the output: the default models the raw end-to-end times.
    """
    missing = [c for c in ("stage1_span", "stage3_span") if c not in df.columns]
    if missing:
        raise UserError(
            f"{source}: --denoise-host needs column {missing[0]!r} (benchmarks/tridiag_streams.py)"
        )
    host = df.groupby("size")["t2_host"].transform("median")
    return df.assign(total_ms=df["stage1_span"] + df["stage3_span"] + host)


def tables(df: pd.DataFrame, source: str = "dataset") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per size: stage medians, sum, T_non_str, measured best), (per size x streams: T_str, T_overhead)."""
    times = df.groupby(["size", "streams"], as_index=False)["total_ms"].median()
    stages = df.groupby("size")[list(STAGES)].median()
    no_one = sorted(set(times["size"]) - set(times.loc[times["streams"] == 1, "size"]))
    if no_one:
        raise UserError(f"{source}: size {no_one[0]} has no 1-stream measurement (T_non_str is needed)")
    sizes = stages.copy()
    sizes["sum"] = sizes[list(SUM_STAGES)].sum(axis=1)
    one = times[times["streams"] == 1].set_index("size")["total_ms"]
    sizes["t_non_str"] = one
    best = times.loc[times.groupby("size")["total_ms"].idxmin()].set_index("size")
    sizes["best_streams"] = best["streams"].astype(int)
    sizes["best_ms"] = best["total_ms"]
    times = times.merge(sizes[["sum", "t_non_str"]], left_on="size", right_index=True)
    k = times["streams"]
    times["t_overhead"] = (times["total_ms"] - times["t_non_str"]) + (k - 1) / k * times["sum"]
    return sizes, times


# -- the seed's models ---------------------------------------------------------------------------------------
def gomez_luna(sum_ms: np.ndarray | float, tau_ms: float) -> np.ndarray:
    """``sqrt(sum / tau)``: the continuous optimum of ``sum / k + tau * k``."""
    return np.sqrt(np.asarray(sum_ms, dtype=float) / tau_ms)


def nearest_choice(k: float, choices: tuple[int, ...] = STREAMS) -> int:
    """The allowed stream count nearest to ``k`` in log scale (the hardware allows at most 32 queues)."""
    return min(choices, key=lambda c: abs(math.log2(c) - math.log2(max(k, 1e-9))))


def _small(x: np.ndarray, alpha: float, beta: float, gamma: float) -> np.ndarray:
    size, k = x
    return alpha * size + beta * np.log10(k) + gamma


def _big(x: np.ndarray, alpha: float, beta: float, gamma: float) -> np.ndarray:
    size, k = x
    return (alpha * size + beta) * np.log2(k ** (4.0 / 3.0)) + gamma


def _metrics(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    mse = float(mean_squared_error(y_true, y_pred))
    r2 = float(r2_score(y_true, y_pred)) if len(y_true) > 1 else float("nan")
    return {"r2": r2, "mse": mse, "rmse": math.sqrt(mse), "n": int(len(y_true))}


@dataclass
class SeedModel:
    """The seed's regression for ``sum`` and its two ``curve_fit`` overhead models, fitted on a 3:1 split."""

    seed: int = 0
    sum_coef: tuple[float, float] = (0.0, 0.0)
    small: tuple[float, float, float] = (0.0, 0.0, 0.0)
    big: tuple[float, float, float] = (0.0, 0.0, 0.0)
    metrics: dict[str, Any] = field(default_factory=dict)

    def fit(self, sizes: pd.DataFrame, times: pd.DataFrame) -> SeedModel:
        x = sizes.index.to_numpy(dtype=float).reshape(-1, 1)
        y = sizes["sum"].to_numpy()
        xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.25, shuffle=True, random_state=self.seed)
        reg = LinearRegression().fit(xtr, ytr)
        self.sum_coef = (float(reg.coef_[0]), float(reg.intercept_))
        self.metrics["sum"] = {
            "train": _metrics(ytr, reg.predict(xtr)),
            "test": _metrics(yte, reg.predict(xte)),
        }
        for name, fn, rows in (
            ("small", _small, times["size"] <= SMALL_MAX),
            ("big", _big, times["size"] > SMALL_MAX),
        ):
            part = times[rows]
            if len(part) < 6:
                raise UserError(
                    f"the {name} overhead model needs at least 6 (size, streams) rows; got {len(part)}"
                )
            tr, te = train_test_split(part, test_size=0.25, shuffle=True, random_state=self.seed)
            xtr2 = np.vstack([tr["size"].to_numpy(float), tr["streams"].to_numpy(float)])
            xte2 = np.vstack([te["size"].to_numpy(float), te["streams"].to_numpy(float)])
            params, _ = curve_fit(fn, xtr2, tr["t_overhead"].to_numpy(), p0=(1e-7, 0.1, 0.0), maxfev=20000)
            setattr(self, name, tuple(float(p) for p in params))
            self.metrics[name] = {
                "train": _metrics(tr["t_overhead"].to_numpy(), fn(xtr2, *params)),
                "test": _metrics(te["t_overhead"].to_numpy(), fn(xte2, *params)),
            }
        return self

    def predict_sum(self, size: float) -> float:
        return self.sum_coef[0] * size + self.sum_coef[1]

    def predict_overhead(self, size: float, k: int) -> float:
        fn, params = (_small, self.small) if size <= SMALL_MAX else (_big, self.big)
        return float(fn(np.array([[float(size)], [float(k)]]), *params)[0])

    def best_streams(self, size: float, choices: tuple[int, ...] = STREAMS) -> int:
        """The seed's rule: overhead below the saving ``(k-1)/k * sum``, largest margin; else one stream."""
        s = self.predict_sum(size)
        margins = {k: (k - 1) / k * s - self.predict_overhead(size, k) for k in choices if k > 1}
        good = {k: v for k, v in margins.items() if v > 0}
        return max(good, key=lambda k: good[k]) if good else 1


# -- our own model -------------------------------------------------------------------------------------------
@dataclass
class RatioModel:
    """Gradient boosting on ``log(T(k) / T(1))`` from ``(log10 size, log2 k)``; the best k minimises it."""

    seed: int = 0
    train_sizes: list[int] = field(default_factory=list)
    test_sizes: list[int] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)

    def fit(self, times: pd.DataFrame) -> RatioModel:
        sizes = np.array(sorted(set(times["size"])))
        tr, te = train_test_split(sizes, test_size=0.25, shuffle=True, random_state=self.seed)
        self.train_sizes, self.test_sizes = sorted(int(s) for s in tr), sorted(int(s) for s in te)
        y = np.log(times["total_ms"] / times["t_non_str"]).to_numpy()
        x = self._features(times["size"].to_numpy(float), times["streams"].to_numpy(float))
        is_train = times["size"].isin(self.train_sizes).to_numpy()
        self.model = GradientBoostingRegressor(
            n_estimators=300, max_depth=3, learning_rate=0.05, subsample=0.8, random_state=self.seed
        ).fit(x[is_train], y[is_train])
        self.metrics = {
            "train": _metrics(y[is_train], self.model.predict(x[is_train])),
            "test": _metrics(y[~is_train], self.model.predict(x[~is_train])),
        }
        return self

    @staticmethod
    def _features(size: np.ndarray, k: np.ndarray) -> np.ndarray:
        return np.column_stack([np.log10(size), np.log2(k)])

    def best_streams(self, size: float, choices: tuple[int, ...] = STREAMS) -> int:
        ks = np.array(choices, dtype=float)
        pred = self.model.predict(self._features(np.full(len(ks), float(size)), ks))
        return int(choices[int(np.argmin(pred))])


# -- evaluation ----------------------------------------------------------------------------------------------
def evaluate(
    df: pd.DataFrame, tau_ms: float = SEED_TAU_MS, seed: int = 0, source: str = "dataset"
) -> dict[str, Any]:
    """Fit every model and build the seed's table: size, measured best, predicted best, time lost."""
    sizes, times = tables(df, source)
    if len(sizes) < 8:
        raise UserError(f"{source}: the models need at least 8 sizes to split 3:1; got {len(sizes)}")
    seed_model = SeedModel(seed).fit(sizes, times)
    ours = RatioModel(seed).fit(times)
    lookup = times.set_index(["size", "streams"])["total_ms"]
    rows = []
    for size, row in sizes.iterrows():
        best_ms = float(row["best_ms"])
        out: dict[str, Any] = {
            "size": int(size),
            "best_streams": int(row["best_streams"]),
            "best_ms": best_ms,
            "one_stream_ms": float(row["t_non_str"]),
            "sum_ms": float(row["sum"]),
            "gomez_luna": float(gomez_luna(row["sum"], tau_ms)),
        }
        for name, model in (("seed", seed_model), ("ours", ours)):
            k = model.best_streams(size)
            measured = lookup.get((size, k), float("nan"))
            out[f"{name}_streams"] = k
            out[f"{name}_ms"] = float(measured)
            out[f"{name}_lost_ms"] = float(measured - best_ms)
            out[f"{name}_lost_pct"] = float(100 * (measured / best_ms - 1))
        out["ours_split"] = "train" if int(size) in ours.train_sizes else "test"
        rows.append(out)
    table = pd.DataFrame(rows)

    def share(name: str, subset: pd.DataFrame) -> dict[str, Any]:
        exact = int((subset[f"{name}_streams"] == subset["best_streams"]).sum())
        within = int((subset[f"{name}_lost_pct"] <= 100 * WITHIN).sum())
        return {"exact": exact, "within_2pct": within, "of": int(len(subset))}

    test = table[table["ours_split"] == "test"]
    summary = {
        "sizes": int(len(table)),
        "seed_model": share("seed", table),
        "ours_all": share("ours", table),
        "ours_test_sizes": share("ours", test),
        "seed_model_on_test_sizes": share("seed", test),
        "gomez_luna_exact": int(
            sum(
                nearest_choice(g) == b
                for g, b in zip(table["gomez_luna"], table["best_streams"], strict=True)
            )
        ),
        "max_speedup_over_one_stream": float((table["one_stream_ms"] / table["best_ms"]).max()),
        "speedup_at": int(table.loc[(table["one_stream_ms"] / table["best_ms"]).idxmax(), "size"]),
    }
    return {
        "tau_ms": tau_ms,
        "seed": seed,
        "sum_model": {"slope_ms_per_unknown": seed_model.sum_coef[0], "intercept_ms": seed_model.sum_coef[1]},
        "overhead_small": dict(zip(("alpha", "beta", "gamma"), seed_model.small, strict=True)),
        "overhead_big": dict(zip(("alpha", "beta", "gamma"), seed_model.big, strict=True)),
        "metrics": {"seed": seed_model.metrics, "ours": ours.metrics},
        "ours_split": {"train": ours.train_sizes, "test": ours.test_sizes},
        "summary": summary,
        "table": table.to_dict(orient="records"),
    }


def format_table(result: dict[str, Any]) -> str:
    """The seed's table as Markdown, with our model beside it."""
    lines = [
        "| size | measured best k | best ms | 1-stream ms | Gomez-Luna k | seed model k | lost % | "
        "our model k | lost % | split |",
        "|" + " --- |" * 10,
    ]
    for r in result["table"]:
        lines.append(
            f"| {r['size']:,} | {r['best_streams']} | {r['best_ms']:.3f} | {r['one_stream_ms']:.3f} | "
            f"{r['gomez_luna']:.1f} | {r['seed_streams']} | {r['seed_lost_pct']:.2f} | "
            f"{r['ours_streams']} | {r['ours_lost_pct']:.2f} | {r['ours_split']} |"
        )
    s = result["summary"]
    lines.append("")
    lines.append(
        f"seed model: best at {s['seed_model']['exact']}/{s['sizes']} sizes, within 2% at "
        f"{s['seed_model']['within_2pct']}/{s['sizes']}; our model: {s['ours_all']['exact']}/{s['sizes']} "
        f"and {s['ours_all']['within_2pct']}/{s['sizes']} (held-out sizes: {s['ours_test_sizes']['exact']}"
        f"/{s['ours_test_sizes']['of']} and {s['ours_test_sizes']['within_2pct']}/"
        f"{s['ours_test_sizes']['of']}); Gomez-Luna (nearest power of two): {s['gomez_luna_exact']}"
        f"/{s['sizes']}; best over one stream: up to {s['max_speedup_over_one_stream']:.3f}x "
        f"(size {s['speedup_at']:,})"
    )
    return "\n".join(lines)


def write_outputs(result: dict[str, Any], out: Path) -> list[Path]:
    """``streams_model.json`` and ``streams_table.md``, each written to a temporary name and renamed."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        out / "streams_model.json": json.dumps(result, indent=1, default=float),
        out / "streams_table.md": format_table(result) + "\n",
    }
    for path, text in files.items():
        write_text(path, text)
    return list(files)
