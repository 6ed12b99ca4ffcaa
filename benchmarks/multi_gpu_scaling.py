#!/usr/bin/env python3
"""One CFD sweep on 1 GPU and then on N GPUs of this host: samples per second of each, the scaling
efficiency, each card's throughput, and whether the cards time the same configurations alike.

    python3 -m benchmarks.multi_gpu_scaling --out DIR        # a host with 2 or more GPUs (see the .sh)
    python3 -m benchmarks.multi_gpu_scaling --cpu --out DIR  # the same steps, CPU workers as the cards
    python3 -m benchmarks.multi_gpu_scaling --table data/cfd/h200x2/multi_gpu_scaling/scaling.json  # reprint

1. ``launchtune sweep SPEC`` with the first card only (``CUDA_VISIBLE_DEVICES=<first>``), then
2. the same spec on the first N cards, each into a folder of its own. Samples per second are the sweep's own
   (``timing.json``: rows over the measuring phase, which starts once every worker has built its workload);
   per card: its rows over its busy time, and the seconds between the first and the last card to finish.
3. A fixed set of configurations (``--agree``, seeded) measured twice on every card at once,
   through the same code as a sweep (``pipeline.sweep.worker.measure_batch`` pinned to each local worker):
   the ratio of card to card against the ratio of a card's two passes (its own noise).

Writes ``scaling.json`` (everything) and ``agreement.csv`` (per configuration, card and pass) to ``--out`` and
prints a table last. Each step runs under a deadline (``--budget-s``) so the whole fits one 10-minute call.
The environment is passed on as it is (NCCL_NVLS_ENABLE and the other multicast switches included); only
CUDA_VISIBLE_DEVICES is set, per run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from benchmarks import run_main
from launchtune.kernels.yamlfile import load_yaml

REPO = Path(__file__).resolve().parents[1]

SPEC = REPO / "cluster_configs" / "sweeps" / "multi_gpu_scaling.yaml"
MULTICAST = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")
# --cpu: the same steps on a grid the numpy backend measures in a second or two per configuration
CPU_SPEC = {
    "backend": "numpy",
    "size": "104x32",
    "samples": 64,
    "samplers": ["random"],
    "batch_size": 16,
    "repeats": 1,
    "validate": {"pool": 500, "top_k": 1, "repeats": 1},
    "train": {"hidden_layers": [8], "max_epochs": 10},
}


def log(msg: str) -> None:
    print(msg, flush=True)


def cards(n: int, cpu: bool) -> list[str]:
    """The entries of CUDA_VISIBLE_DEVICES for the first ``n`` cards (the user's own list where set)."""
    if cpu:
        return [str(i) for i in range(n)]
    # asked in a child process: CUDA fixes the visible devices when it starts, and this process sets
    # CUDA_VISIBLE_DEVICES for the card comparison later
    probe = (
        "import json; from launchtune.kernels.device import visible_gpu_names;"
        " print(json.dumps(visible_gpu_names()))"
    )
    names = json.loads(
        subprocess.check_output([sys.executable, "-c", probe], cwd=REPO, text=True).splitlines()[-1]
    )
    if len(names) < n:
        raise SystemExit(f"need {n} GPUs, this host shows {len(names)}: {names}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",")] if visible else [str(i) for i in range(len(names))]
    return ids[:n]


def run_sweep(label: str, spec: Path, out: Path, n: int, ids: list[str], cpu: bool, timeout: float) -> dict:
    """The real CLI in a subprocess (its own process group, so a deadline ends its workers too)."""
    shutil.rmtree(out, ignore_errors=True)
    minutes = max(0.5, (timeout - 90) / 60)  # leave time for start, training and the report
    cmd = [
        sys.executable,
        "-m",
        "launchtune",
        "sweep",
        str(spec),
        "--out",
        str(out),
        "--max-minutes",
        f"{minutes:.2f}",
    ]
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    if cpu:
        cmd += ["--workers-per-class", str(n)]
    else:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
    where = f"{n} CPU worker(s)" if cpu else f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}"
    log(f"[{label}] {where}: {' '.join(cmd[1:])}")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, process_group=0
    )
    killed = threading.Event()

    def stop() -> None:
        killed.set()
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    timer = threading.Timer(timeout, stop)
    timer.start()
    try:
        for line in proc.stdout:
            print(f"[{label}] {line}", end="", flush=True)
        rc = proc.wait()
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    timing_path = out / "timing.json"
    timing = json.loads(timing_path.read_text()) if timing_path.is_file() else {}
    if killed.is_set():
        log(f"[{label}] stopped at its deadline of {timeout:.0f} s")
    return {
        "label": label,
        "cards": n,
        "cuda_visible_devices": None if cpu else ",".join(ids),
        "rc": rc,
        "deadline_hit": killed.is_set(),
        "wall_s": round(wall, 1),
        "timing": timing,
    }


def agreement(
    spec: Path, work: Path, n: int, ids: list[str], cpu: bool, count: int, timeout: float
) -> pd.DataFrame:
    """Every card measures the same ``count`` configurations twice (pass a, then b), all cards at once."""
    if not cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
    from distributed import wait

    from launchtune.pipeline.cluster.local import open_local_cluster
    from launchtune.pipeline.store.spec import load_spec
    from launchtune.pipeline.sweep.worker import measure_batch, plan_task

    spec_d = load_spec(spec).to_dict()
    sweep = work / "agree"
    shutil.rmtree(sweep, ignore_errors=True)
    sweep.mkdir(parents=True)
    with open_local_cluster(None, work / ".dask-agree", log=log, workers_per_class=n if cpu else 1) as handle:
        client = handle.client
        by_class: dict[str, dict[str, str]] = {}
        for addr, w in client.scheduler_info()["workers"].items():
            for cls in w.get("resources", {}):
                by_class.setdefault(cls, {})[str(w["name"])] = addr
        cls, workers = max(by_class.items(), key=lambda kv: len(kv[1]))
        plan = client.submit(
            plan_task, spec_d, ["random"], count, 12345, resources={cls: 1}, pure=False
        ).result()
        rows = [(i, sampler, config) for i, (sampler, config) in enumerate(plan["configs"])]
        facts = {k: plan[k] for k in ("params", "kernels")}
        futures = []
        for priority, p in ((2, "a"), (1, "b")):
            for name, addr in sorted(workers.items()):
                batch = f"{name}-{p}"
                path = sweep / "shards" / f"gpu_class={cls}" / f"shard-{batch}.parquet"
                futures.append(
                    client.submit(
                        measure_batch,
                        spec_d,
                        facts,
                        cls,
                        batch,
                        rows,
                        str(path),
                        str(sweep),
                        workers=[addr],
                        allow_other_workers=False,
                        resources={cls: 1},
                        pure=False,
                        priority=priority,
                        key=f"agree-{batch}-{time.time_ns()}",
                    )
                )
        done, not_done = wait(futures, timeout=timeout)
        if not_done:
            client.cancel(list(not_done))
            log(f"agreement: {len(not_done)} pass(es) not finished within {timeout:.0f} s")
        for f in done:
            if f.status != "finished":
                log(f"agreement: a pass failed: {f.exception()}")
    frames = [pd.read_parquet(p) for p in sorted(sweep.glob("shards/*/*.parquet"))]
    if not frames:
        return pd.DataFrame()
    df = pd.concat(frames, ignore_index=True)
    df["pass"] = df["batch"].str.rsplit("-", n=1).str[1]
    return df


def ratio_stats(r: np.ndarray) -> dict:
    r = r[np.isfinite(r) & (r > 0)]
    if not len(r):
        return {"n": 0}
    log_r = np.log(r)
    return {
        "n": int(len(r)),
        "median": round(float(np.median(r)), 4),
        "p5": round(float(np.percentile(r, 5)), 4),
        "p25": round(float(np.percentile(r, 25)), 4),
        "p75": round(float(np.percentile(r, 75)), 4),
        "p95": round(float(np.percentile(r, 95)), 4),
        # robust spread of one ratio, in percent (1.4826 x median absolute deviation of its logarithm)
        "sigma_pct": round(float(1.4826 * np.median(np.abs(log_r - np.median(log_r)))) * 100, 3),
        "within_2pct": round(float(np.mean(np.abs(r - 1) <= 0.02)), 3),
    }


def compare_cards(df: pd.DataFrame) -> dict:
    """Card-to-card ratios of the same configurations against each card's pass-b/pass-a ratios."""
    ok = df[df["status"] == "ok"]
    wide = ok.pivot_table(index="sample_id", columns=["worker", "pass"], values="total_ms")
    names = sorted({w for w, _ in wide.columns})
    out: dict = {"cards": names, "configurations": int(df["sample_id"].nunique()), "ok_on_all": 0}
    if len(names) < 2:
        return out
    wide = wide.dropna()
    out["ok_on_all"] = int(len(wide))
    ref = names[0]
    out["within"] = {
        w: ratio_stats((wide[(w, "b")] / wide[(w, "a")]).to_numpy())
        for w in names
        if (w, "b") in wide and (w, "a") in wide
    }
    out["between"] = {}
    for w in names[1:]:
        r = [wide[(w, p)] / wide[(ref, p)] for p in ("a", "b") if (w, p) in wide and (ref, p) in wide]
        out["between"][f"{w}/{ref}"] = ratio_stats(pd.concat(r).to_numpy())
    kernels = [c for c in ok.columns if c.startswith("ms.")]
    per_kernel = ok.groupby("worker")[kernels].median()
    out["per_kernel_median_ratio"] = {
        f"{w}/{ref}": {k[3:]: round(float(per_kernel.loc[w, k] / per_kernel.loc[ref, k]), 4) for k in kernels}
        for w in names[1:]
    }
    noise = max((s.get("sigma_pct", 0) for s in out["within"].values()), default=0)
    verdicts = []
    for pair, s in out["between"].items():
        offset = abs(s["median"] - 1) * 100
        agree = offset <= max(1.0, 2 * noise) and s["sigma_pct"] <= 1.5 * noise + 0.2
        verdicts.append(
            f"{pair}: {'agree within noise' if agree else 'DIFFER'} (offset {offset:.2f}%, "
            f"spread {s['sigma_pct']:.2f}% vs a card's own {noise:.2f}%)"
        )
    out["verdict"] = verdicts
    return out


def sps(run: dict) -> float | None:
    t = run.get("timing") or {}
    return t["rows"] / t["seconds"] if t.get("seconds") else None


def table(result: dict) -> str:
    one, many = result["runs"]
    n = many["cards"]
    s1, sn = sps(one), sps(many)
    lines = [f"{'':34}{'1 card':>14}{f'{n} cards':>14}"]

    def row(name: str, a, b) -> None:
        lines.append(f"{name:34}{a:>14}{b:>14}")

    def fmt(x, spec=".1f"):
        return "-" if x is None else format(x, spec)

    t1, tn = one.get("timing") or {}, many.get("timing") or {}
    row("configurations measured", fmt(t1.get("rows"), "d"), fmt(tn.get("rows"), "d"))
    row("measuring time (s)", fmt(t1.get("seconds")), fmt(tn.get("seconds")))
    row("samples per second", fmt(s1, ".2f"), fmt(sn, ".2f"))
    row("whole command (s)", fmt(one["wall_s"]), fmt(many["wall_s"]))
    spread = (tn.get("finish_spread_s") or {}).values()
    row("cards finish within (s)", "-", fmt(max(spread, default=None), ".2f"))
    if s1 and sn:
        lines.append(
            f"scaling: {sn / s1:.3f}x on {n} cards, efficiency {sn / s1 / n:.1%} "
            f"(aim: >= {0.95 * n:g}x on {n})"
        )
    for label, t in (("1 card", t1), (f"{n} cards", tn)):
        for name, w in sorted((t.get("per_worker") or {}).items()):
            lines.append(
                f"  {label:8} {name:18} {w['rows']:6d} rows  {fmt(w.get('samples_per_s'), '.2f'):>8}/s busy  "
                f"pci {w.get('pci_bus_id') or '-'}  copy {w.get('measured_bandwidth_gbs', '-')} GB/s"
            )
    agree = result.get("agreement") or {}
    for pair, s in (agree.get("between") or {}).items():
        lines.append(
            f"same {agree['ok_on_all']} configurations x 2 passes, {pair}: median ratio {s['median']:.4f} "
            f"(p5 {s['p5']:.4f}, p95 {s['p95']:.4f}), {s['within_2pct']:.0%} within 2%"
        )
    for name, s in (agree.get("within") or {}).items():
        lines.append(f"  repeat on {name}: median {s['median']:.4f} (p5 {s['p5']:.4f}, p95 {s['p95']:.4f})")
    lines += agree.get("verdict", [])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--spec",
        type=Path,
        default=SPEC,
        help="sweep spec (default: cluster_configs/sweeps/multi_gpu_scaling.yaml)",
    )
    ap.add_argument("--samples", type=int, help="random samples (overrides the spec)")
    ap.add_argument("--cards", type=int, default=2, help="cards of the second run (default 2)")
    ap.add_argument(
        "--agree", type=int, default=200, help="configurations every card measures twice (default 200)"
    )
    ap.add_argument("--cpu", action="store_true", help="numpy backend, small grid, CPU workers as cards")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    ap.add_argument("--work", type=Path, default=Path("/tmp/multi_gpu_scaling"), help="sweep folders")
    ap.add_argument(
        "--budget-s", type=float, default=540, help="deadline for all steps together (default 540)"
    )
    ap.add_argument("--table", type=Path, help="reprint the table of a scaling.json, measure nothing")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(args.table.read_text())))
        return 0
    start = time.perf_counter()

    def left() -> float:
        return args.budget_s - (time.perf_counter() - start)

    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    spec = load_yaml(args.spec)
    if args.cpu:
        spec.update(CPU_SPEC)
    if args.samples is not None:
        spec["samples"] = args.samples
    spec_path = args.work / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    ids = cards(args.cards, args.cpu)
    result: dict = {
        "spec": spec,
        "cpu_mode": args.cpu,
        "multicast_env": {k: os.environ.get(k) for k in MULTICAST},  # as found; passed on untouched
        "cuda_visible_devices_at_start": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "runs": [],
    }
    log(f"multicast settings as found (passed on untouched): {result['multicast_env']}")
    # shares of what is left: the 1-card run measures twice as long as the N-card one, and the comparison
    # needs about a minute
    result["runs"].append(
        run_sweep("1 card", spec_path, args.work / "one", 1, ids[:1], args.cpu, min(330, left() - 230))
    )
    result["runs"].append(
        run_sweep(
            f"{args.cards} cards",
            spec_path,
            args.work / "many",
            args.cards,
            ids,
            args.cpu,
            min(250, left() - 80),
        )
    )
    t = time.perf_counter()
    df = agreement(spec_path, args.work, args.cards, ids, args.cpu, args.agree, max(30, left() - 15))
    result["agreement_s"] = round(time.perf_counter() - t, 1)
    if len(df):
        keep = ["sample_id", "worker", "pass", "pci_bus_id", "status", "total_ms"] + [
            c for c in df if c.startswith("ms.")
        ]
        df[keep].sort_values(["sample_id", "worker", "pass"]).to_csv(args.out / "agreement.csv", index=False)
        result["agreement"] = compare_cards(df)
    s1, sn = sps(result["runs"][0]), sps(result["runs"][1])
    if s1 and sn:
        result["scaling"] = {
            "samples_per_s_1": round(s1, 3),
            f"samples_per_s_{args.cards}": round(sn, 3),
            "speedup": round(sn / s1, 4),
            "efficiency": round(sn / s1 / args.cards, 4),
        }
    result["seconds"] = round(time.perf_counter() - start, 1)
    (args.out / "scaling.json").write_text(json.dumps(result, indent=1, default=str))
    log("\n" + table(result))
    ok = all(r["rc"] == 0 for r in result["runs"]) and "scaling" in result and "agreement" in result
    return 0 if ok else 1


if __name__ == "__main__":
    run_main(main)
