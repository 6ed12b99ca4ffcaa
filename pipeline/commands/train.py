"""``launchtune train DIR``: fit the surrogates on DIR/merged, per GPU class and combined.

Models: the CFD seed's MLP (Table 2) behind a StandardScaler, gradient boosting, and an additive per-kernel
model, all on one seeded 75/25 split. Saved as skops files in DIR/models/<group>/, metrics and loss history in
DIR/models/metrics.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train surrogate models on merged data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", type=Path, help="sweep folder (holds merged/)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..jsonio import check_input
    from ..learn.train import train_sweep

    check_input(args.dir, "sweep folder", file_ok=False)  # missing, a file, a loop: each its own line
    train_sweep(args.dir)
    print(f"models: {args.dir / 'models'}")
    return 0
