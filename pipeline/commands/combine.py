"""``launchtune combine OUT SRC [SRC ...]``: one folder from sweeps of several GPU classes, trained
per class and combined, with leave-one-class-out, and reported, without measuring anything.

Each SRC is a sweep folder (``launchtune sweep``), typically one per GPU class measured on its own
machine, or a Kernel Tuner cache (``.json`` / ``.json.gz``, or a folder of them): a GPU measured elsewhere,
one class per cache with its data-sheet facts from the GPU registry (kernels/device.py). Sweep folders must
share workload, case, size, workload options, check setting and launch space; backend, samples, samplers,
repeats, batch size and seed may differ. A cache must record every parameter the sweeps tune (any other
single-valued). Each class may come from one source only. OUT gets
merged/, plan/ (without the sampled configurations), models/ (metrics.json with the same-split comparison
and leave-one-class-out), validation.json (the sources' re-measurements), report.md/json, figures/ and
tuning_table.json; a rerun replaces them and keeps anything else (a PROVENANCE.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """\
examples:
  launchtune combine results/combined \\
      data/cfd/h100/sweep_paper data/cfd/h200/sweep_paper data/cfd/cpu/sweep_paper
  launchtune combine results/convolution_7 \\
      data/convolution/h100/sweep data/benchmark_hub/convolution
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "combine",
        help="sweeps and Kernel Tuner caches of several GPU classes: combined vs per class, leave one out",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "out",
        type=Path,
        help="folder for the combined sweep: new or empty, or one combine made (a rerun replaces it)",
    )
    p.add_argument(
        "sources",
        type=Path,
        nargs="+",
        metavar="SRC",
        help="sweep folders and Kernel Tuner caches (files or folders of them): two GPU classes or more",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..learn.combine import combine
    from ..results.report import build_report

    combine(args.out, args.sources, report=build_report)
    return 0
