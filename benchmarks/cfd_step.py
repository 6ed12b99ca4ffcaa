"""Time the CFD step at the paper's size on the GPU: per-kernel times, effective bandwidth against the
measured device-to-device copy bandwidth, and how much each kernel gains from tuning its (blocks, threads).

    python -m benchmarks.cfd_step --size 3328x1024 --out DIR
    python -m benchmarks.cfd_step --size 3328x1024 --no-scan --fused 40 --out DIR   # + the fusion levels

Writes DIR/cfd_step.json (everything, with provenance) and prints a table last. Effective bandwidth is the
fewest bytes a kernel must move (each input read once, each output written once) over its measured time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from benchmarks import run_main
from launchtune.kernels.backend import get_backend
from launchtune.kernels.cfd.fused_kernels import FusedKernels
from launchtune.kernels.cfd.launch_space import PAPER_BLOCKS, PAPER_THREADS, WIDE_THREADS, wide_blocks
from launchtune.kernels.cfd.physics import KERNEL_NAMES
from launchtune.kernels.cfd.workload import make_workload
from launchtune.kernels.device import describe_device, measure_copy_bandwidth

D = 8  # bytes per double


def min_bytes(nx: int, ny: int, stages: int, source_mode: int) -> dict[str, float]:
    """Fewest bytes each kernel must move in one time step (all stages)."""
    n = nx * ny
    per_stage = {
        "xi_limiter": 4 * (nx + 4) * ny + 8 * (nx + 2) * ny,
        "eta_limiter": 4 * nx * (ny + 4) + 8 * nx * (ny + 2),
        # V of cells -1..nx, incP of -1..nx-1, incM of 0..nx, face vector, flux out
        "xi_flux": 4 * (nx + 2) * ny + 8 * (nx + 1) * ny + 2 * (nx + 1) * ny + 4 * (nx + 1) * ny,
        "eta_flux": 4 * nx * (ny + 2) + 8 * nx * (ny + 1) + 2 * nx * (ny + 1) + 4 * nx * (ny + 1),
        "source": 4 * n if source_mode == 0 else 7 * n,
        "rhs": 4 * (nx + 1) * ny + 4 * nx * (ny + 1) + 4 * n + 4 * n,
    }
    out = {k: stages * v * D for k, v in per_stage.items()}
    # update: U0, R, vol and dt in, V out; the first stage reads V and the dt vectors and writes dt instead of
    # reading it; the last also writes U0.
    upd = stages * 14 * n + (4 + 4) * n + 4 * n
    out["update"] = upd * D
    return out


def fused_min_bytes(nx: int, ny: int, stages: int, level: str, seven: float) -> float:
    """Fewest bytes one time step of a fusion level must move (``seven``: the seven kernels' sum).
    Directional:
    xi_face and eta_face read the state of their rows / columns with the two ghost layers and the face vectors
    and
    write the fluxes; cell_update reads the fluxes, U0, vol and dt and writes the state. Stage: the state with
    its ghost strips, the four face-vector arrays, vol, U0 and dt in, the state out. The first stage also
    reads
    the dt vectors (and writes dt instead of reading it), the last writes U0; ghost writes are left out."""
    if level == "none":
        return seven
    n = nx * ny
    extra = 4 * n + 4 * n  # the first stage's dt vectors, the last stage's U0
    if level == "directional":
        extra += 4 * n  # cell_update reads the state for dt in the first stage (stage_fused has it anyway)
        faces = 4 * (nx + 4) * ny + 6 * (nx + 1) * ny + 4 * nx * (ny + 4) + 6 * nx * (ny + 1)
        cells = 4 * (nx + 1) * ny + 4 * nx * (ny + 1) + 4 * n + n + n + 4 * n
        per_stage = faces + cells
    else:
        per_stage = 4 * (n + 4 * (nx + ny)) + 2 * (nx + 1) * ny + 2 * nx * (ny + 1) + n + 4 * n + n + 4 * n
    return float((stages * per_stage + extra) * D)


def fused_section(ns, copy_gbs: float) -> dict:
    """Each fusion level: the default tile plus ``ns.fused`` random valid tiles of the fused space, each
    checked against the seven-kernel default (2 steps: bitwise, or within 1e-12 with ``tile.arith`` 1, the
    workload's ``check``) and timed; then the best of each level re-timed in
    interleaved rounds against the seven-kernel default (the ratio's spread over rounds is its uncertainty).
    Compile time is the workload's own account, outside every timed step."""
    from launchtune.kernels.cfd.fused_space import FUSION_LEVELS, TILE_DEFAULT

    w = make_workload(ns.case, ns.size, ns.backend, space="fused")
    s = w.solver
    nx, ny = s.size
    sp = w.space()
    seven = sum(min_bytes(nx, ny, s.scheme.stages, s.setup.source_mode).values())
    draws = sp.sample(ns.fused * 8, seed=ns.seed)
    out = {"levels": {}, "seed": ns.seed, "configs_per_level": ns.fused}
    best = {}
    for lvl, level in enumerate(FUSION_LEVELS):
        configs = [sp.default if lvl == 0 else {**sp.default, "fusion": lvl, **TILE_DEFAULT}]
        configs += [c for c in draws if c["fusion"] == lvl][: ns.fused]
        rows = []
        t0 = time.perf_counter()
        for cfg in configs:
            chk = w.check(cfg)
            row = {"config": cfg, "check_ok": chk.ok, "reason": chk.reason}
            if chk.ok:
                t = w.run(cfg, repeats=ns.fused_repeats)
                row.update(
                    step_ms=t.total,
                    kernels_ms={k: v for k, v in t.kernels.items() if v},
                    compile_ms=t.extra["compile_ms"],
                )
            else:
                row["compile_ms"] = w.take_compile_ms()
            rows.append(row)
        ok = [r for r in rows if r["check_ok"]]
        ms = np.array([r["step_ms"] for r in ok])
        nbytes = fused_min_bytes(nx, ny, s.scheme.stages, level, seven)
        b = int(np.argmin(ms))
        best[level] = ok[b]["config"]
        out["levels"][level] = {
            "min_bytes_per_step": nbytes,
            "min_bytes_per_stage": nbytes / s.scheme.stages,
            "configs": len(rows),
            "valid": len(ok),
            "invalid_reasons": sorted({r["reason"][:120] for r in rows if not r["check_ok"]}),
            "best_ms": float(ms.min()),
            "median_ms": float(np.median(ms)),
            "worst_ms": float(ms.max()),
            "best_config": ok[b]["config"],
            "worst_config": ok[int(np.argmax(ms))]["config"],
            "best_effective_gbs": nbytes / (ms.min() * 1e-3) / 1e9,
            "best_fraction_of_copy": nbytes / (ms.min() * 1e-3) / 1e9 / copy_gbs,
            "default_tile_ms": rows[0].get("step_ms"),
            "compile_ms": float(sum(r["compile_ms"] for r in rows)),
            "wall_s": time.perf_counter() - t0,
            "rows": rows,
        }
    # interleaved rounds: the seven-kernel default against each level's best
    rounds = {level: [] for level in FUSION_LEVELS}
    for _ in range(ns.rounds):
        for level in FUSION_LEVELS:
            cfg = sp.default if level == "none" else best[level]
            rounds[level].append(w.run(cfg, repeats=ns.fused_repeats).total)
    base = np.array(rounds["none"])
    for level in FUSION_LEVELS:
        r = np.array(rounds[level]) / base
        lv = out["levels"][level]
        lv["interleaved_ms"] = rounds[level]
        lv["ratio_to_seven_default"] = float(np.median(r))
        lv["ratio_range"] = [float(r.min()), float(r.max())]
        best_ms = float(np.median(rounds[level]))
        lv["best_remeasured_ms"] = best_ms
        lv["best_remeasured_fraction_of_copy"] = lv["min_bytes_per_step"] / (best_ms * 1e-3) / 1e9 / copy_gbs
    out["variants"] = {
        str(k): {"compile_ms": v.compile_ms, "attributes": v.attributes}
        for k, v in FusedKernels.compiled().items()
    }
    return out


def print_fused(f: dict, copy_gbs: float) -> None:
    print(
        f"\nfusion levels ({f['configs_per_level']} random tiles + the default tile each; "
        f"copy {copy_gbs:.0f} GB/s)"
    )
    print(
        f"{'level':<12}{'GB/stage':>9}{'best ms':>9}{'median':>8}{'worst':>8}{'%copy':>6}"
        f"{'vs 7-kernel':>12}{'range':>14}{'valid':>7}{'compile s':>10}  best configuration"
    )
    for level, lv in f["levels"].items():
        c = lv["best_config"]
        shape = (
            "default launch"
            if level == "none" and c.get("fusion") == 0
            else (
                f"{c['tile.block_x']}x{c['tile.block_y']} cells {c['tile.cells_x']}x{c['tile.cells_y']} "
                f"smem {c['tile.smem']} faces {c['tile.faces']} maxreg {c['tile.maxreg']}"
            )
        )
        lo, hi = lv["ratio_range"]
        print(
            f"{level:<12}{lv['min_bytes_per_stage'] / 1e9:9.3f}{lv['best_remeasured_ms']:9.3f}"
            f"{lv['median_ms']:8.3f}{lv['worst_ms']:8.3f}{100 * lv['best_remeasured_fraction_of_copy']:6.0f}"
            f"{lv['ratio_to_seven_default']:12.3f}{f'[{lo:.3f},{hi:.3f}]':>14}"
            f"{lv['valid']:>4}/{lv['configs']:<3}{lv['compile_ms'] / 1e3:9.1f}  {shape}"
        )


def time_alone(solver, name: str, args: tuple, configs: list[tuple[int, int]], repeats: int) -> list[float]:
    """Median ms of one kernel launched alone under each (blocks, threads), events around each launch."""
    impl = solver.launcher(name)
    watch = solver.stopwatch
    out = []
    for b, t in configs:
        impl(b, t, *args)  # warm-up at this shape
        ms = []
        for _ in range(repeats):
            a = watch.mark()
            impl(b, t, *args)
            ms.append(watch.elapsed_ms(a, watch.mark()))
        out.append(float(np.median(ms)))
    return out


def kernel_args(s) -> dict[str, tuple]:
    nx, ny = s.size
    sch = s.scheme
    return {
        "xi_limiter": (s.V, s.xip, s.xim, nx, ny, *s.limiter_args()),
        "eta_limiter": (s.V, s.etp, s.etm, nx, ny, *s.limiter_args()),
        "xi_flux": (s.V, s.xip, s.xim, s.sxx, s.sxy, s.F, nx, ny),
        "eta_flux": (s.V, s.etp, s.etm, s.sex, s.sey, s.G, nx, ny),
        "source": (s.xc, s.yc, s.vol, s.mms, s.S, nx * ny, s.setup.source_mode),
        "rhs": (s.F, s.G, s.S, s.R, nx, ny),
        # a middle stage: reads dt, leaves U0 alone, so repeated launches are idempotent
        "update": (
            s.U0,
            s.R,
            s.dt,
            s.vol,
            s.dtv,
            s.V,
            s.sxx,
            s.sxy,
            s.sex,
            s.sey,
            s.bw,
            s.be,
            s.bs,
            s.bn,
            nx,
            ny,
            1.0 / 3.0,
            sch.cfl,
            False,
            False,
        ),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="3328x1024")
    ap.add_argument("--case", default="inlet")
    ap.add_argument("--repeats", type=int, default=30, help="timed steps at the default configuration")
    ap.add_argument("--scan-repeats", type=int, default=5, help="launches per configuration in the scans")
    ap.add_argument("--no-scan", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--backend", default="cupy", help="cupy (default); numpy only to smoke-test this script")
    ap.add_argument("--fused", type=int, default=0, help="random tiles per fusion level (0: skip the levels)")
    ap.add_argument(
        "--fused-repeats", type=int, default=5, help="timed steps per configuration of the levels"
    )
    ap.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds: each level's best vs the default"
    )
    ap.add_argument("--seed", type=int, default=0)
    ns = ap.parse_args()
    backend = get_backend(ns.backend)
    t_start = time.perf_counter()
    device = describe_device(backend)
    copy_gbs = measure_copy_bandwidth(backend, (2 << 30) if backend.is_gpu else None)
    w = make_workload(ns.case, ns.size, ns.backend, space="paper")
    s = w.solver
    nx, ny = s.size
    sp = w.space()
    default = sp.default
    timing = w.run(default, repeats=ns.repeats)
    timing2 = w.run(default, repeats=ns.repeats)  # a second pass: the spread between passes is the noise
    nbytes = min_bytes(nx, ny, s.scheme.stages, s.setup.source_mode)
    total_bytes = sum(nbytes.values())
    rows = {}
    for k in KERNEL_NAMES:
        ms = timing.kernels[k]
        rows[k] = {
            "ms_per_step": ms,
            "ms_per_step_pass2": timing2.kernels[k],
            "min_bytes_per_step": nbytes[k],
            "effective_gbs": nbytes[k] / (ms * 1e-3) / 1e9,
            "fraction_of_copy": nbytes[k] / (ms * 1e-3) / 1e9 / copy_gbs,
            **s.kernel_attributes[k],
        }
    result = {
        "what": "CFD time step (4-stage RK, 7 kernels per stage) at the default launch configuration",
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([sys.executable.split("/")[-1], *sys.argv]),
        "device": device,
        "copy_bandwidth_gbs": copy_gbs,
        "workload": w.describe(),
        "default_config": default,
        "step_ms": timing.total,
        "step_ms_pass2": timing2.total,
        "step_min_bytes": total_bytes,
        "step_effective_gbs": total_bytes / (timing.total * 1e-3) / 1e9,
        "step_fraction_of_copy": total_bytes / (timing.total * 1e-3) / 1e9 / copy_gbs,
        "kernels": rows,
    }
    if not ns.no_scan:
        s.reset()
        s.set_config(default)
        s.step()  # realistic data in every buffer
        args = kernel_args(s)
        paper = list(itertools.product(PAPER_BLOCKS, PAPER_THREADS))
        wide_all = list(itertools.product(wide_blocks(max(s.domain_sizes().values())), WIDE_THREADS))
        scan = {}
        best_paper, best_wide = {}, {}
        for k in KERNEL_NAMES:
            lim = s.max_threads_per_block[k]
            d = (default[f"{k}.blocks"], default[f"{k}.threads"])
            wide = [c for c in wide_all if c[1] <= lim]
            t_def = time_alone(s, k, args[k], [d] * 3, ns.scan_repeats)
            t_paper = time_alone(s, k, args[k], paper, ns.scan_repeats)
            t_wide = time_alone(s, k, args[k], wide, ns.scan_repeats)
            ip, iw = int(np.argmin(t_paper)), int(np.argmin(t_wide))
            best_paper[k], best_wide[k] = paper[ip], wide[iw]
            scan[k] = {
                "default": list(d),
                "default_ms": float(np.median(t_def)),
                "default_ms_spread": [min(t_def), max(t_def)],
                "paper_best": list(paper[ip]),
                "paper_best_ms": t_paper[ip],
                "paper_worst_ms": max(t_paper),
                "paper_median_ms": float(np.median(t_paper)),
                "wide_best": list(wide[iw]),
                "wide_best_ms": t_wide[iw],
                "paper_default_over_best": float(np.median(t_def)) / t_paper[ip],
                "wide_default_over_best": float(np.median(t_def)) / t_wide[iw],
                "paper_all_ms": t_paper,
                "wide_configs": [list(c) for c in wide],
                "wide_all_ms": t_wide,
            }
        result["scan"] = scan
        # Whole step with each kernel at its best configuration (tuned kernels timed alone, then together).
        for label, best in (("paper_best", best_paper), ("wide_best", best_wide)):
            cfg = {}
            for k in KERNEL_NAMES:
                cfg[f"{k}.blocks"], cfg[f"{k}.threads"] = best[k]
            wk = make_workload(
                ns.case, ns.size, ns.backend, space="paper" if label == "paper_best" else "wide"
            )
            check = wk.check(cfg)
            t = wk.run(cfg, repeats=ns.repeats)
            result[f"step_{label}"] = {
                "config": cfg,
                "step_ms": t.total,
                "kernels_ms": t.kernels,
                "check_ok": check.ok,
                "check_reason": check.reason,
                "speedup_over_default": timing.total / t.total,
            }
            del wk
    if ns.fused:
        result["fused"] = fused_section(ns, copy_gbs)
    result["bench_wall_s"] = time.perf_counter() - t_start
    if ns.out:
        Path(ns.out).mkdir(parents=True, exist_ok=True)
        (Path(ns.out) / "cfd_step.json").write_text(json.dumps(result, indent=1) + "\n")
    # table last
    print(
        f"\n{device.get('device_name')}  copy {copy_gbs:.0f} GB/s  size {nx}x{ny}  "
        f"step {timing.total:.3f} ms (pass 2: {timing2.total:.3f})  "
        f"{result['step_effective_gbs']:.0f} GB/s = {100 * result['step_fraction_of_copy']:.0f}% of copy"
    )
    print(f"{'kernel':<12}{'ms/step':>9}{'GB/s':>7}{'%copy':>6}{'regs':>5}{'maxT':>5}", end="")
    if "scan" in result:
        print(f"{'def alone':>10}{'paper best':>16}{'x':>6}{'wide best':>18}{'x':>6}{'worst/best':>11}")
    else:
        print()
    for k in KERNEL_NAMES:
        r = rows[k]
        print(
            f"{k:<12}{r['ms_per_step']:9.3f}{r['effective_gbs']:7.0f}{100 * r['fraction_of_copy']:6.0f}"
            f"{r['num_regs']:5d}{r['max_threads_per_block']:5d}",
            end="",
        )
        if "scan" in result:
            c = result["scan"][k]
            print(
                f"{c['default_ms']:10.4f}{str(tuple(c['paper_best'])):>11}{c['paper_best_ms']:5.3f}"
                f"{c['paper_default_over_best']:6.2f}{str(tuple(c['wide_best'])):>13}{c['wide_best_ms']:5.3f}"
                f"{c['wide_default_over_best']:6.2f}{c['paper_worst_ms'] / c['paper_best_ms']:11.1f}"
            )
        else:
            print()
    for label in ("paper_best", "wide_best"):
        if f"step_{label}" in result:
            r = result[f"step_{label}"]
            print(
                f"step at {label}: {r['step_ms']:.3f} ms ({r['speedup_over_default']:.3f}x the default), "
                f"check {'ok' if r['check_ok'] else 'FAILED ' + r['check_reason']}"
            )
    if "fused" in result:
        print_fused(result["fused"], copy_gbs)
    return 0


if __name__ == "__main__":
    run_main(main)
