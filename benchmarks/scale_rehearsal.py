"""Scale rehearsal: sweeps of 10^4..10^6 replayed samples over many simulated workers, one machine.

Each worker of the local cluster is a CPU process running the ``replay`` workload
(pipeline/sweep/rehearsal.py): it answers each configuration from the merged H100 sweep and sleeps for the
recorded time x ``--time-scale``, 1% of configurations raise (``failed`` rows), and 1% of the workers (at
least one) kill their own process with SIGKILL in the middle of a batch. Per (samples, workers) it records:

* wall time of the measuring phase against the ideal (the sum of the sleeps the rows asked for / workers),
* the client-and-scheduler process's CPU seconds per task (the scheduler of a LocalCluster runs in it),
* tasks and shards created, the plan's size on disk,
* merge time and peak memory, training time and peak memory (each in a fresh subprocess: its own
  ``ru_maxrss``),
* that every planned sample is in the merged rows exactly once.

``--rows-only N``: merge + training at N rows without measuring, from a measured folder's shards copied with
offset sample ids (10^6 rows would take this machine an hour to measure at 32 workers).

    python -m benchmarks.scale_rehearsal --samples 10000 100000 --workers 8 32 --out data/rehearsal/cpu/scale
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import run_main

REPO = Path(__file__).resolve().parents[1]
DATASET = REPO / "data" / "cfd" / "h100" / "sweep_paper" / "merged"


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def rss_mb() -> float:
    """This process's peak resident memory (MiB): VmHWM, the high-water mark of its own address space.

    Not ``getrusage().ru_maxrss``: Linux carries the parent's high-water mark over fork/vfork and exec into
    the child's, so a child of the benchmark (which holds the scheduler and the plan) reported the parent's
    peak (seen: merge and train both "763.9 MiB" at 10^5 samples)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)  # kB
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # not Linux: KiB, upper bound


def workers_cpu_s() -> dict[int, float]:
    """CPU seconds (user + system) of each process below this one (the cluster's worker processes)."""
    import psutil

    out = {}
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
            out[child.pid] = t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return out


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def commit() -> str:
    """The commit measured: ``git`` here, or ``REHEARSAL_COMMIT`` where the tree was copied without its git
    (a copy inside another checkout would report that checkout's commit)."""
    if os.environ.get("REHEARSAL_COMMIT"):
        return os.environ["REHEARSAL_COMMIT"]
    out = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True, text=True)
    return out.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def make_spec(samples: int, workers: int, args, kill_dir: Path, batch_size: int):
    from launchtune.pipeline.store.spec import parse_spec

    kills = max(1, round(workers * args.kill_fraction))
    data = {
        "name": f"rehearsal-{samples}-{workers}",
        "workload": "replay",
        "case": "inlet",
        "size": "3328x1024",
        "backend": "numpy",
        "gpu_classes": ["cpu"],
        "options": {
            "dataset": str(args.dataset),
            "time_scale": args.time_scale,
            "fail_fraction": args.fail_fraction,
            "straggler_fraction": args.straggler_fraction,
            "straggler_factor": args.straggler_factor,
        },
        "samples": samples,
        "batch_size": batch_size,
        "repeats": 1,
        "validate": {"pool": 200, "top_k": 1, "repeats": 1},
        "train": {"hidden_layers": [64, 64, 32], "max_epochs": args.max_epochs, "max_rows": args.max_rows},
    }
    # the workers killed: spread over the names; each dies once, in its batch holding its after-th run (half
    # its share of the samples: mid-sweep, mid-batch). A test hook, no spec option: the workers the cluster
    # starts inherit it from this process's environment.
    from launchtune.pipeline.sweep.rehearsal import KILL_ENV

    os.environ[KILL_ENV] = json.dumps(
        {
            "workers": [f"cpu-{(i * workers) // kills}" for i in range(kills)],
            "after": max(2, samples // workers // 2 + batch_size // 2),
            "dir": str(kill_dir),
        }
    )
    return parse_spec(data, "scale_rehearsal")


def in_child(what: str, folder: Path, log: Path) -> dict[str, Any]:
    """Run ``what`` (merge or train) on ``folder`` in a fresh interpreter; returns its JSON line."""
    cmd = [sys.executable, "-m", "benchmarks.scale_rehearsal", f"--{what}", str(folder)]
    with open(log, "a") as f:
        done = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=f, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_merge(folder: Path) -> None:
    import numpy as np
    import pyarrow.parquet as pq

    from launchtune.pipeline.store.folder import SweepFolder
    from launchtune.pipeline.store.shards import merge

    t0 = time.perf_counter()
    merged = merge(folder)
    seconds = time.perf_counter() - t0
    peak = rss_mb()
    # read back from disk, two columns (not part of the merge's time or memory)
    back = pq.read_table(merged.path, columns=["sample_id", "status"])
    ids = back.column("sample_id").to_numpy()
    print(
        json.dumps(
            {
                "merge": "streamed",
                "merge_s": round(seconds, 2),
                "merge_peak_rss_mb": peak,
                "rows": int(len(ids)),
                "distinct_samples": int(len(np.unique(ids))),
                "shards": len(SweepFolder(folder).shards()),
                "statuses": back.column("status").to_pandas().value_counts().to_dict(),
            }
        )
    )


def child_train(folder: Path) -> None:
    from launchtune.pipeline.learn.train import train_sweep

    t0 = time.perf_counter()
    out = train_sweep(folder, log=lambda m: print(m, file=sys.stderr))
    seconds = time.perf_counter() - t0
    groups = out["metrics"]["groups"]
    print(
        json.dumps(
            {
                "train_s": round(seconds, 2),
                "train_peak_rss_mb": rss_mb(),
                "training_rows": out["metrics"].get("training_rows"),
                "fit_s": {
                    g: {m: s["fit_seconds"] for m, s in e.get("models", {}).items()}
                    for g, e in groups.items()
                },
                "r2_test": {
                    g: {m: round(s["r2_test"], 4) for m, s in e.get("models", {}).items()}
                    for g, e in groups.items()
                },
            }
        )
    )


def sleeps_s(folder: Path, args) -> tuple[float, int]:
    """Seconds of sleep the merged rows asked for (the workers' real work), and the failed rows."""
    import pyarrow.parquet as pq

    from launchtune.pipeline.sweep.rehearsal import RehearsalWorkload

    if not args.straggler_fraction:  # every sleep is its row's time x the scale: summed in numpy
        t = pq.read_table(folder / "merged", columns=["status", "total_ms"]).to_pandas()
        slept = float(t.loc[t["status"] == "ok", "total_ms"].sum()) * args.time_scale / 1000
        return slept, int((t["status"] == "failed").sum())
    w = RehearsalWorkload(
        "inlet",
        "3328x1024",
        "numpy",
        str(args.dataset),
        time_scale=args.time_scale,
        straggler_fraction=args.straggler_fraction,
        straggler_factor=args.straggler_factor,
    )
    t = pq.read_table(folder / "merged").to_pandas()
    ok = t[t["status"] == "ok"]
    params = w.replay.params
    total = 0.0
    for row, ms in zip(ok[params].to_numpy(dtype=int), ok["total_ms"].to_numpy(float), strict=True):
        total += w.sleep_ms(dict(zip(params, row, strict=True)), ms)
    return total / 1000, int((t["status"] == "failed").sum())


def one(samples: int, workers: int, args, work: Path) -> dict[str, Any]:
    from launchtune.pipeline.cluster import open_cluster
    from launchtune.pipeline.store.folder import SweepFolder
    from launchtune.pipeline.sweep.measure import measure_batches, warm_workers
    from launchtune.pipeline.sweep.run import plan_class

    folder = work / f"s{samples}-w{workers}"
    shutil.rmtree(folder, ignore_errors=True)
    kill_dir = folder / "kills"
    kill_dir.mkdir(parents=True)
    if args.batch_size == "auto":
        from launchtune.pipeline.store.batching import suggest_batch_size

        batch_size = suggest_batch_size(samples, workers, 5.46e-3 * args.time_scale)  # the dataset's mean
    else:
        batch_size = int(args.batch_size)
    spec = make_spec(samples, workers, args, kill_dir, batch_size)
    log_path = work / f"s{samples}-w{workers}.log"
    logf = open(log_path, "w")

    def log(m: str) -> None:
        print(m, file=logf, flush=True)

    row: dict[str, Any] = {
        "samples": samples,
        "workers": workers,
        "batch_size": batch_size,
        "load_before": load(),
    }
    t0 = time.perf_counter()
    with open_cluster("local", ["cpu"], workers, SweepFolder(folder).dask_dir, log) as handle:
        row["cluster_start_s"] = round(time.perf_counter() - t0, 1)
        t1 = time.perf_counter()
        plan = plan_class(handle.client, spec, "cpu", folder, replan=True)
        row["plan_s"] = round(time.perf_counter() - t1, 1)
        row["plan_mb"] = round(sum(f.stat().st_size for f in (folder / "plan").iterdir()) / 2**20, 2)
        row["plan_files"] = sorted(f.name for f in (folder / "plan").iterdir())
        SweepFolder(folder).write_meta(
            {
                "spec": spec.to_dict(),
                "planning_key": spec.planning_key(),
                "plan": {k: plan[k] for k in ("params", "values", "default", "kernels")},
                "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
        # the workers build their workload first (measure_batches does it too, before its clock; done here
        # so that the CPU counted below is the measuring phase's only)
        warm_workers(handle.client, spec.to_dict(), ["cpu"], log)
        workers0 = workers_cpu_s()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        timing = measure_batches(handle.client, spec, {"cpu": plan}, folder, log, local=True)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        workers1 = workers_cpu_s()
        row["load_during"] = load()
        row["worker_profiler"] = bool(__import__("dask").config.get("distributed.worker.profile.enabled"))
    row["measure_s"] = timing["seconds"]
    row["tasks"] = timing["batches"]
    row["client_scheduler_cpu_s"] = round(cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2)
    row["scheduler_cpu_ms_per_task"] = round(
        1000 * row["client_scheduler_cpu_s"] / max(1, timing["batches"]), 2
    )
    # CPU of the worker processes alive at both ends (a killed worker's CPU is lost with it; its
    # restarted process counts from its start): per sample, what each simulated card costs the host
    row["workers_cpu_s"] = round(sum(workers1[p] - workers0[p] for p in workers1.keys() & workers0.keys()), 2)
    row["worker_cpu_ms_per_sample"] = round(1000 * row["workers_cpu_s"] / samples, 3)
    row["killed_workers"] = sorted(p.stem for p in kill_dir.glob("*.killed"))
    row["finish_spread_s"] = timing["finish_spread_s"].get("cpu")
    row.update(in_child("merge", folder, log_path))
    slept, failed = sleeps_s(folder, args)
    row["sleep_s_total"] = round(slept, 1)
    row["ideal_s"] = round(slept / workers, 2)
    row["ratio_to_ideal"] = round(row["measure_s"] / row["ideal_s"], 3)
    row["every_sample_once"] = row["rows"] == samples == row["distinct_samples"]
    row["failed_rows"] = failed
    if not args.no_train:
        row.update(in_child("train", folder, log_path))
    row["load_after"] = load()
    return row


def idle_cost(workers: int, seconds: float, work: Path) -> list[dict[str, Any]]:
    """CPU (in cores) an idle local cluster of ``workers`` CPU workers costs, with Dask's defaults and then
    with :data:`pipeline.cluster.local.QUIET_WORKER_CONFIG`: the scheduler's process (scheduler, nannies)
    and the worker processes, over ``seconds`` after a 3 s settle."""
    import psutil

    import launchtune.pipeline.cluster.local as local

    out = []
    for quiet in (False, True):
        original = local.quiet_worker_config
        if not quiet:
            local.quiet_worker_config = lambda n, log, cores=None: {}  # Dask's defaults
        try:
            with local.open_local_cluster(["cpu"], work / "idle", lambda m: None, workers):
                time.sleep(3)
                me = psutil.Process()
                kids = me.children(recursive=True)
                main0, kids0 = sum(me.cpu_times()[:2]), sum(sum(k.cpu_times()[:2]) for k in kids)
                time.sleep(seconds)
                main1, kids1 = sum(me.cpu_times()[:2]), sum(sum(k.cpu_times()[:2]) for k in kids)
        finally:
            local.quiet_worker_config = original
        out.append(
            {
                "kind": "idle",
                "workers": workers,
                "config": "quiet" if quiet else "dask defaults",
                "seconds": seconds,
                "scheduler_process_cores": round((main1 - main0) / seconds, 3),
                "worker_processes_cores": round((kids1 - kids0) / seconds, 3),
                "load": load(),
            }
        )
    return out


def rows_only(n: int, source: Path, work: Path, args) -> dict[str, Any]:
    """A folder of ``n`` rows from ``source``'s shards (sample ids offset per copy), merged and trained."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from launchtune.pipeline.store.checksums import SHARD_CONFIGS, SHARD_SEED, configs_digest
    from launchtune.pipeline.store.folder import SweepFolder

    src = SweepFolder(source)
    shards = src.shards()
    per = sum(pq.read_metadata(p).num_rows for p in shards)
    copies = -(-n // per)
    folder = work / f"rows{n}"
    shutil.rmtree(folder, ignore_errors=True)
    dst = SweepFolder(folder)
    (folder / "plan").mkdir(parents=True)
    meta = src.read_meta()
    meta["spec"]["samples"] = per * copies
    meta["spec"]["train"]["max_rows"] = args.max_rows
    meta["spec"]["train"]["max_epochs"] = args.max_epochs
    dst.write_meta(meta)
    # the copies' plan: the source's configurations once per copy (copy c's sample c * per + i is sample i),
    # so the merge checks the copied shards against a plan as it checks a sweep's
    plan = src.read_plan("cpu")
    facts = {k: v for k, v in plan.items() if k not in ("configs", "configs_file", "n_configs", "checksums")}
    dst.write_plan("cpu", {**facts, "configs": list(plan["configs"]) * copies})
    params, seed = list(plan["params"]), meta["spec"]["seed"]
    t0 = time.perf_counter()
    for c in range(copies):
        for p in shards:
            t = pq.read_table(p).sort_by("sample_id")
            ids = pa.compute.add(t.column("sample_id"), c * per)
            t = t.set_column(t.schema.get_field_index("sample_id"), "sample_id", ids)
            # the digest of the copy's configurations at its new sample ids, as a worker would write it
            matrix = np.column_stack([t.column(q).to_numpy() for q in params])
            digest = configs_digest(ids.to_numpy(), matrix, seed)
            t = t.replace_schema_metadata(
                {**t.schema.metadata, SHARD_CONFIGS: digest.encode(), SHARD_SEED: str(seed).encode()}
            )
            out = dst.shard_path("cpu", f"c{c:03d}-{p.stem.removeprefix('shard-')}")
            out.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(t, out, compression="zstd")
    row: dict[str, Any] = {
        "rows_requested": n,
        "copies": copies,
        "write_shards_s": round(time.perf_counter() - t0, 1),
    }
    row["load_before"] = load()
    log_path = work / f"rows{n}.log"
    row.update(in_child("merge", folder, log_path))
    row["every_sample_once"] = row["rows"] == row["distinct_samples"] == per * copies
    if not args.no_train:
        row.update(in_child("train", folder, log_path))
    row["load_after"] = load()
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table (written beside the figure; the README quotes it)."""
    cols = [
        ("kind", "kind"),
        ("host", "machine"),
        ("commit", "commit"),
        ("folder", "folder"),
        ("samples", "samples"),
        ("workers", "workers"),
        ("time_scale", "time x"),
        ("batch_size", "batch"),
        ("plan_s", "plan s"),
        ("plan_size_mb", "plan MB"),
        ("tasks", "tasks"),
        ("measure_s", "wall s"),
        ("ideal_s", "ideal s"),
        ("ratio_to_ideal", "wall/ideal"),
        ("scheduler_cpu_ms_per_task", "client+sched CPU ms/task"),
        ("worker_cpu_ms_per_sample", "worker CPU ms/sample"),
        ("killed_workers", "killed"),
        ("failed_rows", "failed rows"),
        ("every_sample_once", "each sample once"),
        ("rows", "merged rows"),
        ("shards", "shards"),
        ("merge_s", "merge s"),
        ("merge_peak_rss_mb", "merge peak MiB"),
        ("train_s", "train s"),
        ("train_peak_rss_mb", "train peak MiB"),
        ("rows_used", "rows trained"),
        ("load_during", "load (1, 5, 15 min)"),
        ("worker_profiler", "worker profiler"),
    ]
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + " --- |" * len(cols)]
    for r in rows:
        r = dict(r)
        used = (r.get("training_rows") or {}).get("per_class", {})
        r["rows_used"] = sum(c["used"] for c in used.values()) if used else None
        r["load_during"] = r.get("load_during") or r.get("load_before")
        r["killed_workers"] = ", ".join(r.get("killed_workers") or []) or None
        r["plan_size_mb"] = r.get("plan_mb", r.get("plan_json_mb"))
        if "machine" in r:
            r["host"] = _series({**r, "workers": 0}).split(", ", 1)[1]
        lines.append("| " + " | ".join("" if r.get(k) is None else str(r.get(k)) for k, _ in cols) + " |")
    return "\n".join(lines) + "\n"


def _series(r: dict[str, Any]) -> str:
    """Which machine and which code a row measured (the figure's legend): the 2-core VM or the 16-core
    device host (both call themselves ``vm``), pinned or not, and whether the row predates this round."""
    cores = int(str(r.get("machine", "")).split(", ")[1].split()[0])
    host = "2-core VM" if cores == 2 else f"{cores}-core host"
    usable = r.get("cores_usable")
    if usable is not None and len(usable) < cores:
        host += f", pinned to {len(usable)} cores"
    fixes = "" if "workers_cpu_s" in r else ", first fixes only"
    return f"{r['workers']} workers, {host}{fixes}"


def plot(out: Path) -> Path:
    """``OUT/scale.png`` and ``OUT/table.md`` from the jsonl files in OUT: wall time over ideal per sweep (one
    line per machine, workers and code), peak memory of merge and training per merged rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def read(name: str) -> list[dict[str, Any]]:
        path = out / name
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []

    rows = read("results_profiler_on.jsonl") + read("results.jsonl") + read("results_device.jsonl")
    again = read("remeasured_memory.jsonl")
    before = [r for r in rows if r.get("worker_profiler")]
    rows = [r for r in rows if not r.get("worker_profiler")]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.8))
    # a sweep at a fraction of the recorded times is CPU-bound by design (a test of the 10^6 path on 2
    # cores): in table.md, not in the figure
    sweeps = [r for r in rows if r["kind"] == "sweep" and r.get("time_scale", 1) >= 1]
    for name in sorted({_series(r) for r in sweeps}):
        pts = sorted(
            (r["samples"], r["ratio_to_ideal"], r["load_during"][0]) for r in sweeps if _series(r) == name
        )
        style = ("o--" if "first fixes" in name else "o-") if "VM" in name else "s-"
        a.plot(
            [p[0] for p in pts], [p[1] for p in pts], style, label=name, alpha=0.6 if "first" in name else 1
        )
        for x, y, ld in pts:
            a.annotate(f"load {ld:.1f}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=6)
    if before:
        a.plot(
            [r["samples"] for r in before],
            [r["ratio_to_ideal"] for r in before],
            "kx",
            label="before: Dask's worker profilers on",
        )
    a.axhline(1.25, color="grey", ls="--", lw=1, label="target 1.25x")
    a.set(
        xscale="log",
        yscale="log",
        xlabel="replayed samples",
        ylabel="measuring wall time / ideal",
        title="orchestration",
    )
    a.legend(fontsize=6)
    for label, marker, pick in (
        ("merge, in memory (before)", "o--", lambda r: r.get("merge") != "streamed"),
        ("merge, streamed", "o-", lambda r: r.get("merge") == "streamed"),
    ):
        mem = sorted((r["rows"], r["merge_peak_rss_mb"]) for r in rows + again if pick(r) and "rows" in r)
        if mem:
            b.plot([m[0] for m in mem], [m[1] for m in mem], marker, label=label)
    train = sorted((r["rows"], r["train_peak_rss_mb"]) for r in rows + again if r.get("train_peak_rss_mb"))
    b.plot([m[0] for m in train], [m[1] for m in train], "s", label="train (50,000 rows drawn)")
    b.axhline(4096, color="grey", ls="--", lw=1, label="target 4 GiB")
    b.set(
        xscale="log", yscale="log", xlabel="merged rows", ylabel="peak RSS (MiB)", title="login node memory"
    )
    b.legend(fontsize=7)
    fig.suptitle(
        "scale rehearsal (data/rehearsal/cpu/scale/: results*.jsonl, remeasured_memory.jsonl)", fontsize=9
    )
    fig.tight_layout()
    (out / "table.md").write_text(table(before + rows + again))
    path = out / "scale.png"
    fig.savefig(path, dpi=120)
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--workers", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--time-scale", type=float, default=4.0, help="sleep = recorded ms x this (mean 5.46 ms)")
    ap.add_argument("--fail-fraction", type=float, default=0.01)
    ap.add_argument("--kill-fraction", type=float, default=0.01, help="share of workers killed (at least 1)")
    ap.add_argument("--straggler-fraction", type=float, default=0.0)
    ap.add_argument("--straggler-factor", type=float, default=10.0)
    ap.add_argument("--batch-size", default="25", help="an integer, or auto (suggest_batch_size)")
    ap.add_argument("--max-epochs", type=int, default=200)
    ap.add_argument("--max-rows", type=int, default=50_000)
    ap.add_argument("--no-train", action="store_true")
    ap.add_argument(
        "--rows-only", type=int, nargs="*", default=[], help="merge+train at N rows from --source"
    )
    ap.add_argument("--source", type=Path, help="a measured folder whose shards --rows-only copies")
    ap.add_argument("--dataset", type=Path, default=DATASET)
    ap.add_argument("--work", type=Path, default=Path("/tmp/scale_rehearsal"))
    ap.add_argument("--out", type=Path, help="append result rows to OUT/results.jsonl")
    ap.add_argument(
        "--remeasure",
        type=Path,
        nargs="*",
        default=[],
        help="merge+train again in these folders (memory fix)",
    )
    ap.add_argument("--idle", type=int, help="only: CPU of an idle cluster of N workers, defaults vs quiet")
    ap.add_argument("--plot", type=Path, help="only draw DIR/scale.png from DIR/results.jsonl")
    ap.add_argument("--merge", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--train", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.merge:
        return child_merge(args.merge)
    if args.train:
        return child_train(args.train)
    if args.plot:
        print(plot(args.plot))
        return None
    args.work.mkdir(parents=True, exist_ok=True)
    if args.idle:
        measured = commit()  # before the first row dirties the tree
        for row in idle_cost(args.idle, 10.0, args.work):
            row.update(commit=measured, at=datetime.now(UTC).isoformat(timespec="seconds"))
            print(json.dumps(row), flush=True)
            if args.out:
                with open(args.out / "idle.jsonl", "a") as f:
                    f.write(json.dumps(row) + "\n")
        return None
    for folder in args.remeasure:
        log_path = args.work / f"remeasure-{folder.name}.log"
        row = {"kind": "remeasure", "folder": folder.name, "load_before": load()}
        row.update(in_child("merge", folder, log_path))
        if not args.no_train:
            row.update(in_child("train", folder, log_path))
        row.update(load_after=load(), commit=commit(), at=datetime.now(UTC).isoformat(timespec="seconds"))
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out / "remeasured_memory.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
    if args.remeasure:
        return None
    prov = {
        "command": "python -m benchmarks.scale_rehearsal " + " ".join(sys.argv[1:] if argv is None else argv),
        "commit": commit(),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30, 1)} GiB",
        "cpu_model": cpu_model(),
        # taskset / cpuset: the cores the sweep (and every worker it starts) may run on
        "cores_usable": sorted(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    results = []
    jobs = [("sweep", s, w) for s in args.samples for w in args.workers] + [
        ("rows", n, 0) for n in args.rows_only
    ]
    for kind, n, w in jobs:
        row = one(n, w, args, args.work) if kind == "sweep" else rows_only(n, args.source, args.work, args)
        row = {
            "kind": kind,
            **row,
            **prov,
            "time_scale": args.time_scale,
            "fail_fraction": args.fail_fraction,
        }
        results.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            with open(args.out / "results.jsonl", "a") as f:
                f.write(json.dumps(row) + "\n")
    for r in results:
        keys = (
            "kind",
            "samples",
            "workers",
            "rows",
            "measure_s",
            "ideal_s",
            "ratio_to_ideal",
            "tasks",
            "shards",
            "merge_s",
            "merge_peak_rss_mb",
            "train_s",
            "train_peak_rss_mb",
            "every_sample_once",
            "load_during",
        )
        print(" ".join(f"{k}={r.get(k)}" for k in keys if k in r))


if __name__ == "__main__":
    run_main(main)
