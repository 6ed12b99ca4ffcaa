"""``python -m launchtune.kernels.tridiag solve --size N --streams K --backend {auto,cupy,numpy}``:
one solve, its residual and its stage times."""

from __future__ import annotations

import argparse
import sys

import numpy as np

from ..backend import BACKEND_NAMES, BackendError, gpu_count
from ..usage import Parser
from .system import (
    COPY_CHOICES,
    STREAM_CHOICES,
    TridiagError,
    ZeroPivotError,
    residual,
)
from .workload import CASES, DEFAULT, ENDS_PERCENT, STAGES


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m launchtune.kernels.tridiag",
        description="The tridiagonal partition solver (FP64) with CUDA streams.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    solve = sub.add_parser(
        "solve",
        help="solve one random system end to end; print residual and stage times",
        description="Solve one system host -> device -> host and print ||Ax-b||/||b||, the "
        "seven stage times of the one-stream pipeline and the end-to-end time "
        "with --streams streams (ms; CUDA events on the GPU, host clock on numpy).",
    )
    solve.add_argument("--size", required=True, help="number of unknowns, e.g. 1000000 or 1e6")
    solve.add_argument(
        "--streams",
        type=int,
        default=DEFAULT["streams"],
        help=f"CUDA streams the transfers are chunked over: {', '.join(map(str, STREAM_CHOICES))}"
        " (default %(default)s)",
    )
    solve.add_argument(
        "--backend",
        choices=BACKEND_NAMES,
        default="auto",
        help="cupy (GPU), numpy (CPU reference) or auto: cupy where a GPU is visible",
    )
    solve.add_argument(
        "--threads", type=int, default=DEFAULT["threads"], help="threads per block (default 256)"
    )
    solve.add_argument(
        "--m", type=int, default=DEFAULT["m"], help="sub-system size (default 10, as the seed)"
    )
    solve.add_argument(
        "--stage2",
        choices=("host", "gpu"),
        default="host",
        help="where the interface system is solved: host (the seed's, default) or gpu (on the device; with "
        "--backend auto it needs a GPU)",
    )
    solve.add_argument(
        "--copies",
        choices=COPY_CHOICES,
        default="streams",
        help="how the chunks' copies and kernels are issued: streams (one stream per chunk, the seed's, "
        "default); with --stage2 gpu also ordered (one upload and one download stream), streamed (stage 2 "
        "reduced chunk by chunk as the chunks arrive) or spike (SPIKE slices: the fastest host to host)",
    )
    solve.add_argument(
        "--ends",
        type=int,
        choices=ENDS_PERCENT,
        default=100,
        help="the first and last chunk's share of an inner chunk, %% (streamed and spike; default 100)",
    )
    solve.add_argument(
        "--case",
        choices=CASES,
        default="random",
        help="random diagonally dominant system, or one implicit 1-D heat step",
    )
    solve.add_argument("--seed", type=int, default=0, help="seed of the random system (default 0)")
    solve.add_argument(
        "--repeats", type=int, default=5, help="timed repeats after one warm-up (median shown)"
    )
    return parser


def solve_command(args: argparse.Namespace) -> int:
    from .workload import make_workload

    if args.repeats < 1:
        raise TridiagError(f"--repeats {args.repeats} must be at least 1")
    if args.stage2 == "gpu" and args.backend == "auto" and gpu_count() == 0:
        raise BackendError(
            "--stage2 gpu solves the interface system on the GPU and no GPU is visible here; give "
            "--backend numpy to run the same steps on the CPU"
        )
    work = make_workload(args.case, args.size, args.backend, seed=args.seed)
    config = {
        "streams": args.streams,
        "threads": args.threads,
        "m": args.m,
        "stage2": args.stage2,
        "copies": args.copies,
        "ends": args.ends,
    }
    timing = work.run(config, repeats=args.repeats)  # checks the configuration before anything is solved
    x = work.solve(args.streams, args.threads, args.m, args.stage2, args.copies, args.ends)
    res = residual(work.abcd, x)
    print(
        f"n = {work.n:,}  backend = {work.backend.name}  streams = {args.streams}  threads = {args.threads}  "
        f"m = {args.m}  stage2 = {args.stage2}  copies = {args.copies}  ends = {args.ends}%  "
        f"case = {args.case}"
    )
    print(f"residual ||Ax-b||/||b|| = {res:.3e}  ({'ok' if res < 1e-12 else 'TOO LARGE'})")
    print("stage times, one stream (ms):")
    for name in STAGES:
        print(f"  {name:8s} {timing.kernels[name]:10.4f}")
    print(f"end to end, 1 stream:  {timing.extra['total_1stream']:10.4f} ms")
    print(
        f"end to end, {args.streams} stream{'s' if args.streams > 1 else ''}: {timing.total:10.4f} ms "
        f"(median of {timing.repeats})"
    )
    return 0 if np.isfinite(res) and res < 1e-12 else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return solve_command(args)
    except (TridiagError, BackendError, ZeroPivotError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
