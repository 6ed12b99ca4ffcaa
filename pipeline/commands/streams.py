"""``launchtune streams --dataset PATH``: fit the seed's stream-count models (and ours) to
measured times; print measured versus predicted best number of CUDA streams per system size."""

from __future__ import annotations

import argparse
from pathlib import Path

from launchtune.kernels.tridiag.system import COPY_CHOICES, STAGE2_CHOICES

EPILOG = """The dataset is benchmarks/tridiag_streams.py's streams.csv (one row per size x streams) or a
merged tridiag sweep (Parquet); one pipeline (--copies, --stage2) is modelled at a time. tau, the cost of
creating one stream, is read from a meta.json beside the dataset when there is one, else --tau, else the
seed's 0.004448 ms. Example:
  launchtune streams --dataset data/tridiag/h100/streams/streams.csv --out results/streams"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "streams",
        help="predict the best number of CUDA streams for the tridiagonal solver",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--dataset", type=Path, required=True, help="streams.csv, or a Parquet file/folder of a sweep"
    )
    p.add_argument(
        "--tau", type=float, help="ms to create one CUDA stream (default: meta.json, else the seed's)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the 3:1 shuffled splits (default 0)")
    p.add_argument("--threads", type=int, help="keep rows with this many threads per block (default 256)")
    p.add_argument("--m", type=int, help="keep rows with this sub-system size (default 10)")
    p.add_argument(
        "--stage2", choices=STAGE2_CHOICES, help="keep rows with stage 2 there (default gpu where present)"
    )
    p.add_argument(
        "--copies",
        choices=COPY_CHOICES,
        help="keep rows of this pipeline (default spike where present, else the commonest); --stage2 "
        "then defaults to gpu where those rows have it (spike: always)",
    )
    p.add_argument(
        "--denoise-host",
        action="store_true",
        help="model stage1_span + stage3_span + the size's one-stream host time instead of the raw "
        "end-to-end time (the host stage does not depend on the stream count)",
    )
    p.add_argument("--out", type=Path, help="also write streams_model.json and streams_table.md here")
    p.set_defaults(func=run)


def _tau(args: argparse.Namespace) -> float:
    from ..errors import UserError
    from ..streams.model import SEED_TAU_MS

    if args.tau is not None:
        if not args.tau > 0:
            raise UserError(f"--tau {args.tau}: must be a positive number of milliseconds")
        return args.tau
    meta = (args.dataset if args.dataset.is_dir() else args.dataset.parent) / "meta.json"
    if meta.is_file():
        from ..jsonio import read_json

        doc = read_json(meta, "streams dataset description")
        tau = doc.get("tau_ms") if isinstance(doc, dict) else None
        if isinstance(tau, int | float) and tau > 0:
            return float(tau)
    return SEED_TAU_MS


def run(args: argparse.Namespace) -> int:
    from ..store.ownership import refuse_inside_project_folder
    from ..streams.model import (
        denoise_host,
        evaluate,
        format_table,
        load_dataset,
        write_outputs,
    )

    if args.out:
        refuse_inside_project_folder(args.out, "streams model (--out)")
    tau = _tau(args)
    df = load_dataset(args.dataset, threads=args.threads, m=args.m, stage2=args.stage2, copies=args.copies)
    if args.denoise_host:
        df = denoise_host(df, str(args.dataset))
        print("end-to-end times rebuilt as stage1_span + stage3_span + one-stream host time (--denoise-host)")
    result = evaluate(df, tau_ms=tau, seed=args.seed, source=str(args.dataset))
    print(f"{args.dataset}: {result['summary']['sizes']} sizes, tau = {tau:.6f} ms, split seed {args.seed}")
    sm = result["sum_model"]
    print(
        f"sum model: {sm['slope_ms_per_unknown']:.4e} ms/unknown x size + {sm['intercept_ms']:.4f} ms "
        f"(test R2 {result['metrics']['seed']['sum']['test']['r2']:.4f})"
    )
    for name in ("small", "big"):
        p, m = result[f"overhead_{name}"], result["metrics"]["seed"][name]
        print(
            f"T_overhead {name}: alpha {p['alpha']:.4e}, beta {p['beta']:.4f}, gamma {p['gamma']:.4f} "
            f"(R2 train {m['train']['r2']:.3f}, test {m['test']['r2']:.3f})"
        )
    ours = result["metrics"]["ours"]
    print(
        f"our model (log T(k)/T(1)): R2 train {ours['train']['r2']:.3f}, "
        f"held-out sizes {ours['test']['r2']:.3f}"
    )
    print(format_table(result))
    if args.out:
        for path in write_outputs(result, args.out):
            print(f"wrote {path}")
    return 0
