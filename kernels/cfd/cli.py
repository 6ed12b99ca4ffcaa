"""``python -m kernels.cfd run|mms``: run a case and write its solution, or verify the order of accuracy.

User mistakes (a bad size, case, backend or option) print one line on stderr and exit with code 2; nothing is
written before the run has succeeded.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from .. import tuning_table
from ..autotune import TableError, TunerError, attach_tuners, tuning_files, tuning_summary
from ..autotune.whole import attach_whole_tuner
from ..backend import BACKEND_NAMES, gpu_count
from ..device import describe_device
from ..files import FileRefused, check_input
from ..progress import Progress
from ..usage import Parser
from .cases import CASES
from .mms import run_mms
from .physics import LIMITERS, mach
from .solver import Scheme, Solver, parse_size
from .workload import MAX_SMOOTHING

AUTOTUNE_MODES = ("off", "scan", "seeded")
EQUATIONS = ("rho", "rhou", "rhov", "rhoE")
MAX_STEPS = 10**8  # a run of more steps would not end in any session of ours


class UsageError(ValueError):
    """A mistake in the command line: reported in one line, exit code 2."""


def _scheme_args(p: argparse.ArgumentParser, default_limiter: str) -> None:
    g = p.add_argument_group("scheme")
    g.add_argument(
        "--limiter",
        default=default_limiter,
        help=f"MUSCL limiter: {', '.join(LIMITERS)} (default {default_limiter})",
    )
    g.add_argument(
        "--kappa",
        type=float,
        default=-1.0,
        help="MUSCL kappa of Eq. (6): -1 fully upwind (default), 0 Fromm, 1/3 third order, 1 central",
    )
    g.add_argument(
        "--epsilon", type=float, default=1.0, help="MUSCL epsilon: 1 second order (default), 0 first"
    )
    g.add_argument("--cfl", type=float, default=1.0, help="CFL number of the local time step (default 1.0)")
    g.add_argument("--stages", type=int, default=4, help="Runge-Kutta stages, alpha_k = 1/(s-k) (default 4)")


def _scheme(ns: argparse.Namespace) -> Scheme:
    if ns.limiter not in LIMITERS:
        raise UsageError(f"--limiter {ns.limiter!r}: choose one of {', '.join(LIMITERS)}")
    return Scheme(kappa=ns.kappa, epsilon=ns.epsilon, limiter=ns.limiter, cfl=ns.cfl, stages=ns.stages)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="python -m launchtune.kernels.cfd",
        description="2D finite-volume Euler solver (SENSEI 30-degree supersonic inlet, Xue & Roy) on CuPy or "
        "numpy: seven kernels per Runge-Kutta stage, each with its own launch configuration.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run a case and write solution.npz, residuals.csv, summary.json and mach.png",
        description="Run a case for --steps time steps and write DIR/solution.npz (x, y, rho, u, v, p shaped "
        "(NX, NY), i along the flow, j = 0 on the ramp wall), DIR/residuals.csv (L2 residual norms per "
        "equation), DIR/summary.json and DIR/mach.png (Mach number with streamlines).",
    )
    run.add_argument("--case", default="inlet", help=f"one of {', '.join(CASES)} (default inlet)")
    run.add_argument(
        "--size", default="208x64", help="cells NXxNY, e.g. 3328x1024 (the paper's); default 208x64"
    )
    run.add_argument("--steps", type=int, default=2000, help="time steps (default 2000)")
    run.add_argument(
        "--backend",
        default="auto",
        help="auto (CuPy where a GPU is visible, else numpy; --autotune then needs a GPU), cupy or numpy",
    )
    run.add_argument("--out", required=True, help="output directory (created; files in it are replaced)")
    run.add_argument(
        "--residual-every",
        type=int,
        default=None,
        help="compute residual norms every N steps (default: about 200 rows per run)",
    )
    run.add_argument("--smoothing", type=int, default=0, help="elliptic (Winslow) grid-smoothing sweeps (0)")
    run.add_argument(
        "--autotune",
        default="off",
        help="runtime tuning of each kernel's launch: off (default), scan, seeded",
    )
    run.add_argument(
        "--tuning-table",
        default=None,
        help="tuning table JSON seeding --autotune seeded (a sweep report's, or DIR/tuning_table.json of a "
        "tuned run: its entries for this GPU class and size are locked without scanning)",
    )
    run.add_argument(
        "--space",
        default="paper",
        choices=("paper", "fused"),
        help="what --autotune tunes: paper (default: each of the seven kernels' blocks and threads) or "
        "fused (whole step configurations: fusion level, 2-D tile, cells per thread, shared memory, faces, "
        "register cap; seeded from a fused sweep's tuning_table.json; one step per sample)",
    )
    run.add_argument(
        "--autotune-arith",
        action="store_true",
        help="with --space fused: let the tuner try tile.arith=1 too (fewer divisions and roots, FMA "
        "contraction: the best stage tiles take about 25%% less time on the H100, within 1e-12 of the seven "
        "kernels after 100 steps on the 3328x1024 inlet, but not their bits, so the answer depends on what "
        "the tuner tried); default: only the seven kernels' arithmetic, bit for bit",
    )
    run.add_argument("--no-plot", action="store_true", help="skip mach.png")
    _scheme_args(run, "minmod")
    mms = sub.add_parser(
        "mms",
        help="observed order of accuracy with the manufactured solution of Roy et al. (2004)",
        description="Converge the manufactured-solution case on N x N grids of the unit square and print "
        "the L2 "
        "error of density and pressure with the observed order between successive grids.",
    )
    mms.add_argument("--sizes", default="32,64,128", help="comma-separated N (default 32,64,128)")
    mms.add_argument("--backend", default="numpy", help="numpy (default), cupy or auto")
    mms.add_argument("--out", default=None, help="directory for mms.json (optional)")
    mms.add_argument("--drop", type=float, default=10.0, help="residual orders to converge each grid (10)")
    _scheme_args(mms, "van_albada")
    return parser


def _check_common(ns: argparse.Namespace) -> None:
    if ns.backend not in BACKEND_NAMES:
        raise UsageError(f"--backend {ns.backend!r}: choose one of {', '.join(BACKEND_NAMES)}")
    if not 0 < ns.cfl < math.inf:
        raise UsageError(f"--cfl must be a positive finite number (got {ns.cfl})")


def _write_atomically(out: Path, files: dict[str, Any]) -> None:
    """Write every file into a temporary directory beside ``out``, then move them in: a failed run leaves
    nothing half-written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, writer in files.items():
            try:
                writer(tmp / name)
            except OSError as exc:  # a full disk's write names no file, a read-only one the temporary one
                raise OSError(exc.errno, exc.strerror or str(exc), str(out / name)) from None
        out.mkdir(parents=True, exist_ok=True)
        for name in files:
            os.replace(tmp / name, out / name)
    finally:
        for p in tmp.glob("*"):
            p.unlink()
        tmp.rmdir()


def _step_line(done: int, steps: int, rows: list[list[float]]) -> str:
    drop = -np.log10(max(rows[-1][5:9])) if rows else 0.0
    return f"step {done}/{steps}  residual down {drop:.2f} orders"


def _out_folder(out: Path) -> None:
    """``--out`` made before minutes of computing: a path that cannot be a folder (under a file, in /proc,
    a name too long, no permission) is one line now, not after the run."""
    try:
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a directory")
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot make this folder: {exc.strerror or exc}") from None


def _run_size(ns: argparse.Namespace) -> tuple[int, int]:
    """``run``'s flags checked before anything is built: one line each (``UsageError``); the grid size."""
    _check_common(ns)
    if ns.case not in CASES:
        raise UsageError(f"--case {ns.case!r}: choose one of {', '.join(CASES)}")
    try:
        size = parse_size(ns.size)
    except ValueError as e:
        raise UsageError(f"--size: {e}") from None
    if not 1 <= ns.steps <= MAX_STEPS:
        raise UsageError(f"--steps must be from 1 to {MAX_STEPS:,} (got {ns.steps})")
    if ns.residual_every is not None and not 1 <= ns.residual_every <= MAX_STEPS:
        raise UsageError(f"--residual-every must be from 1 to {MAX_STEPS:,} steps (got {ns.residual_every})")
    if not 0 <= ns.smoothing <= MAX_SMOOTHING:
        raise UsageError(f"--smoothing must be from 0 to {MAX_SMOOTHING:,} (got {ns.smoothing})")
    if ns.autotune not in AUTOTUNE_MODES:
        raise UsageError(f"--autotune {ns.autotune!r}: choose one of {', '.join(AUTOTUNE_MODES)}")
    if ns.tuning_table is not None:
        if ns.autotune != "seeded":  # nothing else reads it: ignored in silence before
            raise UsageError("--tuning-table seeds the runtime tuner: it needs --autotune seeded")
        try:  # missing, a directory, a FIFO, a symlink loop: each its own line
            check_input(ns.tuning_table, "tuning table", folder_ok=False)
        except FileRefused as exc:
            raise UsageError(f"--tuning-table: {exc}") from None
    if ns.space == "fused" and ns.autotune == "off":
        raise UsageError("--space fused tunes whole configurations: give --autotune scan or seeded")
    if ns.autotune_arith and ns.space != "fused":
        raise UsageError("--autotune-arith chooses the fused kernels' arithmetic: it needs --space fused")
    if ns.autotune != "off" and ns.backend == "auto" and gpu_count() == 0:
        raise UsageError(
            f"--autotune {ns.autotune} tunes GPU launches and no GPU is visible here; give --backend numpy "
            "to watch the tuner's mechanics on the CPU (the launch parameters change nothing there)"
        )
    return size


def _attach_tuning(ns: argparse.Namespace, solver: Solver) -> tuple[Any, Any]:
    """``--autotune``: per-kernel tuners, or one tuner of the fused levels (``--space fused``); (None, None)
    when off."""
    if ns.space == "fused":
        try:
            whole = attach_whole_tuner(solver, ns.autotune, ns.tuning_table, arith=ns.autotune_arith)
        except (TableError, TunerError) as e:
            raise UsageError(str(e)) from None
        print(
            f"autotune fused: {len(whole.tuner.candidates)} candidates ({whole.tuning.seed})",
            file=sys.stderr,
        )
        return None, whole
    if ns.autotune != "off":
        return attach_tuners(solver, ns.autotune, ns.tuning_table), None
    return None, None


def _march(ns: argparse.Namespace, solver: Solver, step: Any) -> tuple[list[list[float]], float] | None:
    """``ns.steps`` steps: the residual rows (step, norms, norms relative to the first) and the wall time;
    None (the error said) where the solution diverged."""
    every = ns.residual_every or max(1, ns.steps // 200)
    rows: list[list[float]] = []
    first = None
    report_every = max(1, ns.steps // 10)
    t0 = time.perf_counter()
    meter = Progress(lambda line: print(line, file=sys.stderr, flush=True))
    for k in range(ns.steps):
        norms = step(residuals=(k % every == 0 or k == ns.steps - 1))
        if norms is not None:
            if not np.all(np.isfinite(norms)):
                print(f"error: the solution diverged (residual not finite) at step {k}", file=sys.stderr)
                return None
            first = first if first is not None else np.maximum(norms, 1e-300)
            rows.append([k, *norms, *(norms / first)])
        # a line each tenth of the run and at least every 10 s (a run of days on a CPU says how long is left)
        line = partial(_step_line, k + 1, ns.steps, rows)  # built only when a line is due
        meter.update((k + 1) / ns.steps, line, force=(k + 1) % report_every == 0)
    solver.backend.synchronize()
    return rows, time.perf_counter() - t0


def cmd_run(ns: argparse.Namespace) -> int:
    size = _run_size(ns)
    scheme = _scheme(ns)
    solver = Solver(ns.case, size, ns.backend, scheme=scheme, smoothing=ns.smoothing)
    tuners, whole = _attach_tuning(ns, solver)
    out = Path(ns.out)
    _out_folder(out)  # after the solver's and the tuning table's checks, before the steps
    marched = _march(ns, solver, whole.step if whole is not None else solver.step)
    if marched is None:
        return 1
    rows, wall = marched
    w = solver.primitives()
    m = solver.setup.metrics
    x, y = m.xc.T.copy(), m.yc.T.copy()
    summary: dict[str, Any] = {
        "case": ns.case,
        "size": list(size),
        "steps": ns.steps,
        "wall_s": round(wall, 4),
        "ms_per_step": round(wall / ns.steps * 1e3, 4),
        "residual_orders_dropped": [round(float(-np.log10(v)), 3) for v in rows[-1][5:9]],
        "final_residuals": dict(zip(EQUATIONS, map(float, rows[-1][1:5]), strict=True)),
        "solver": solver.describe(),
        "launch": {k: list(v) for k, v in solver.launch.items()},
        "mach_range": [float(mach(w).min()), float(mach(w).max())],
        "command": " ".join(["python -m launchtune.kernels.cfd", *sys.argv[1:]]),
    }

    summary["device"] = describe_device(solver.backend)
    if tuners is not None:
        summary["autotune"] = tuning_summary(tuners)
    if whole is not None:
        summary["autotune"] = whole.summary()

    def write_npz(p: Path) -> None:
        with open(p, "wb") as f:
            np.savez_compressed(f, x=x, y=y, rho=w[0], u=w[1], v=w[2], p=w[3])

    def write_csv(p: Path) -> None:
        with open(p, "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["step", *(f"l2_{e}" for e in EQUATIONS), *(f"rel_{e}" for e in EQUATIONS)])
            for r in rows:
                wr.writerow([int(r[0]), *(f"{v:.6e}" for v in r[1:])])

    files: dict[str, Any] = {
        "solution.npz": write_npz,
        "residuals.csv": write_csv,
        "summary.json": lambda p: p.write_text(json.dumps(summary, indent=2, default=str) + "\n"),
    }
    if tuners is not None:  # launches.csv (the launch log) and tuning_table.json (for --autotune seeded)
        files.update(tuning_files(tuners))
    if whole is not None and whole.table_entry() is not None:
        files[tuning_table.FILE_NAME] = whole.write_table
    if not ns.no_plot:
        from .plot import mach_figure

        title = f"{ns.case} {size[0]}x{size[1]}, {ns.steps} steps"
        files["mach.png"] = lambda p: mach_figure(x, y, mach(w), w[1], w[2], p, title)
    _write_atomically(out, files)
    print(f"wrote {', '.join(files)} to {out}")
    if whole is not None and tuning_table.FILE_NAME not in files:
        print(
            f"no tuning_table.json: the fused scan of {len(whole.tuner.candidates)} candidates did not "
            f"finish in {ns.steps} steps; run more steps to get a table",
            file=sys.stderr,
        )
    kernels = summary["autotune"]["kernels"] if tuners is not None else {}
    unfinished = [k for k, v in kernels.items() if not v["scans_finished"]]
    if unfinished and tuning_table.FILE_NAME not in files:
        most = max(kernels[k]["candidates"] for k in unfinished)
        print(
            f"no tuning_table.json: no kernel finished its first scan in {ns.steps} steps ({len(unfinished)} "
            f"kernels still scanning, up to {most} candidates each); run more steps to get a table",
            file=sys.stderr,
        )
    return 0


def cmd_mms(ns: argparse.Namespace) -> int:

    _check_common(ns)
    try:
        sizes = [int(s) for s in ns.sizes.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--sizes {ns.sizes!r}: give comma-separated integers, e.g. 32,64,128") from None
    if len(sizes) < 2 or any(n < 4 for n in sizes) or sorted(set(sizes)) != sizes:
        raise UsageError(f"--sizes {ns.sizes!r}: give at least two increasing sizes, each >= 4")
    if ns.out:  # before minutes of computing
        _out_folder(Path(ns.out))
    result = run_mms(
        sizes, ns.backend, _scheme(ns), drop=ns.drop, progress=lambda s: print(s, file=sys.stderr, flush=True)
    )
    print(f"{'N':>6} {'L2(rho)':>12} {'order':>6} {'L2(p)':>12} {'order':>6}")
    for k, n in enumerate(sizes):
        o_r = f"{result['order_rho'][k - 1]:6.3f}" if k else "     -"
        o_p = f"{result['order_p'][k - 1]:6.3f}" if k else "     -"
        print(f"{n:>6} {result['l2_rho'][k]:12.4e} {o_r} {result['l2_p'][k]:12.4e} {o_p}")
    if ns.out:
        out = Path(ns.out)
        _write_atomically(out, {"mms.json": lambda p: p.write_text(json.dumps(result, indent=2) + "\n")})
        print(f"wrote {out / 'mms.json'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(argv)
    try:
        return cmd_run(ns) if ns.command == "run" else cmd_mms(ns)
    except ValueError as e:  # UsageError, BackendError, SpaceError, a bad scheme option
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a full or read-only disk while writing the results: one line naming the file
        if e.filename is None:
            raise
        print(f"error: {e.filename}: {e.strerror or e}; nothing of this run was written", file=sys.stderr)
        return 2
