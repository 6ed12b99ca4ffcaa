#!/usr/bin/env python3
"""SLURM handing out the real GPUs of one host to a sweep, one dask-jobqueue job per GPU.

    python3 -m benchmarks.slurm_gpu --out DIR          # on a host with 2 GPUs, as root (see slurm_gpu.sh)
    python3 -m benchmarks.slurm_gpu --cpu --out DIR    # the same steps on the CPU: numpy, fake GPU devices

1. A single-node SLURM from the .deb files in ``--debs`` (``tests/slurm/debs.py``: unpacked with ``dpkg -x``
   into a private folder, no package registry, nothing under /), started by ``tests.slurm.localslurm`` with
   ``gres.conf`` naming the real ``/dev/nvidiaN`` of the first two cards as two GRES types, one partition per
   type: two GPU classes (``<class>a`` on the first card, ``<class>b`` on the second), as a node with two
   different card models would be declared.
2. The CFD sweep of ``cluster_configs/sweeps/multi_gpu_scaling.yaml`` (paper size, fewer samples) for both
   classes through the real CLI, ``launchtune sweep SPEC --cluster <generated yaml>``: one job per
   class, each job ``--gres=gpu:<type>:1``, ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` in its set-up lines. While it
   runs, every job's GPU index is read from ``scontrol show job -d`` (SLURM's own record) and the first
   class's job is cancelled with ``scancel`` once a quarter of its batches are written.
3. Checks: every sample of every class exactly once, every batch in one shard; every row's ``slurm_job_id``
   is a job of its class's partition, its ``cuda_visible_devices`` is the GPU index SLURM gave that job (and
   the ``SLURM_JOB_GPUS`` the job saw), its ``pci_bus_id`` is the PCI bus id ``nvidia-smi`` gives that
   device; the cancelled job's class was finished by a new job on the same card.
4. Throughput: the sweep's ``timing.json`` against the local cluster's on the same host, the same spec as one
   class and both cards (``--local``, same number of configurations), when time is left.

Writes ``slurm_gpu.json`` (everything), ``jobs.csv`` (per job: SLURM's GPU, the rows' view) and
``slurm-logs.tar.gz`` (slurm.conf, gres.conf, daemon and job logs) to ``--out`` and prints a table last.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import yaml

from benchmarks import run_main
from benchmarks.multi_gpu_scaling import CPU_SPEC, MULTICAST, SPEC
from benchmarks.multi_gpu_scaling import run_sweep as run_local_sweep
from launchtune.kernels.yamlfile import load_yaml
from tests.slurm.debs import unpack
from tests.slurm.localslurm import LocalSlurm

REPO = Path(__file__).resolve().parents[1]

LOCAL_REFERENCE = REPO / "data" / "cfd" / "h200x2" / "multi_gpu_scaling" / "scaling.json"
_IDX = re.compile(r"GRES=\S*?\(IDX:([0-9,\-]+)\)")


def log(msg: str) -> None:
    print(msg, flush=True)


def gpus_of_host(n: int) -> list[dict]:
    """The first ``n`` GPUs as nvidia-smi lists them: index, /dev minor number, PCI bus id, name."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,pci.bus_id,name", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # the /dev/nvidiaN number is no --query-gpu field; `nvidia-smi -q` gives it per bus id
    minors, bus = {}, None
    for line in subprocess.run(
        ["nvidia-smi", "-q"], capture_output=True, text=True, check=True
    ).stdout.splitlines():
        if line.startswith("GPU "):
            bus = line.split()[1].lower()
        elif line.strip().startswith("Minor Number") and bus:
            minors[bus] = int(line.split(":")[1])
    cards = []
    for line in out.strip().splitlines():
        index, pci, name = (x.strip() for x in line.split(",", 2))
        # nvidia-smi writes 8 hex digits of PCI domain, CUDA (and so the rows) 4
        cards.append(
            {"index": int(index), "minor": minors[pci.lower()], "pci_bus_id": pci[-12:], "name": name}
        )
    if len(cards) < n:
        raise SystemExit(f"need {n} GPUs, nvidia-smi lists {len(cards)}")
    return cards[:n]


def fake_devices(root: Path, n: int) -> list[dict]:
    """Character devices with /dev/null's numbers: SLURM sets CUDA_VISIBLE_DEVICES only for a real device node
    (a plain file gets "not a valid character or block device" and no GPU variables)."""
    cards = []
    for i in range(n):
        path = root / f"fake-nvidia{i}"
        if not path.exists():
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        cards.append({"index": i, "minor": i, "pci_bus_id": "", "name": "cpu", "file": str(path)})
    return cards


class JobWatch(threading.Thread):
    """Polls ``scontrol show job -d`` for every job: partition, state and the GPU index SLURM allocated."""

    def __init__(self, slurm: LocalSlurm, period: float = 1.0):
        super().__init__(daemon=True)
        self.slurm, self.period = slurm, period
        self.jobs: dict[str, dict] = {}
        self.stop = threading.Event()

    def poll(self) -> None:
        out = subprocess.run(
            [self.slurm.cmd("scontrol"), "show", "job", "-d", "-o"],
            env=self.slurm.env,
            capture_output=True,
            text=True,
        ).stdout
        for line in out.splitlines():
            fields = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            job = fields.get("JobId")
            if not job:
                continue
            rec = self.jobs.setdefault(job, {"job_id": job, "gpu_idx": None})
            rec.update(partition=fields.get("Partition"), state=fields.get("JobState"))
            m = _IDX.search(line)
            if m and rec["gpu_idx"] is None:
                rec["gpu_idx"] = m.group(1)

    def run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            self.stop.wait(self.period)


def shard_rows(out: Path, cls: str) -> list[dict]:
    cols = ["sample_id", "batch", "slurm_job_id", "slurm_partition", "cuda_visible_devices", "pci_bus_id"]
    rows = []
    for path in sorted((out / "shards" / f"gpu_class={cls}").glob("shard-*.parquet")):
        for row in pq.read_table(path, columns=cols).to_pylist():
            rows.append({**row, "shard": path.name})
    return rows


def cluster_yaml(path: Path, classes: dict[str, dict], cpu: bool, work: Path, facts: dict) -> Path:
    env_line = f"export PYTHONPATH={os.pathsep.join([str(REPO), os.environ.get('PYTHONPATH', '')])}"
    record = (
        f'echo "$SLURM_JOB_ID $SLURM_JOB_PARTITION ${{SLURM_JOB_GPUS:--}} ${{CUDA_VISIBLE_DEVICES:--}}"'
        f" >> {work / 'job-gpus.txt'}"
    )
    config = {
        "scheduler": {"interface": "lo", "dashboard": "127.0.0.1:0", "tls": True, "release_idle_after_s": 30},
        "defaults": {
            "cores": 1 if cpu else 4,
            "memory": "1GiB" if cpu else "6GiB",
            "walltime": "00:30:00",
            "python": sys.executable,
            "setup": [
                env_line,
                # SLURM indexes GPUs in gres.conf order (/dev/nvidiaN); CUDA by default fastest first
                "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
                "export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1",
                record,
            ],
        },
        "classes": {
            cls: {"partition": c["partition"], "gres": f"gpu:{c['gres_type']}:1", "device": facts}
            for cls, c in classes.items()
        },
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_slurm_sweep(
    spec: Path,
    cluster: Path,
    out: Path,
    slurm: LocalSlurm,
    victim_class: str,
    batches: int,
    timeout: float,
    watch: JobWatch,
) -> dict:
    """The CLI sweep through SLURM; cancels ``victim_class``'s running job once a quarter of its batches are
    written. Returns rc, wall time, the cancelled job and how many of its class's shards existed then."""
    shutil.rmtree(out, ignore_errors=True)
    env = {
        **slurm.env,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    minutes = max(0.5, (timeout - 90) / 60)
    cmd = [
        sys.executable,
        "-m",
        "launchtune",
        "sweep",
        str(spec),
        "--cluster",
        str(cluster),
        "--out",
        str(out),
        "--max-minutes",
        f"{minutes:.2f}",
    ]
    log(f"[slurm] {' '.join(cmd[1:])}")
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, process_group=0
    )
    lines: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if " - distributed." not in line:
                print(f"[slurm] {line}", end="", flush=True)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    cancel = {"job": None, "shards_before": None, "at_s": None}
    shard_dir = out / "shards" / f"gpu_class={victim_class}"
    deadline = t0 + timeout
    while proc.poll() is None and time.perf_counter() < deadline:
        if cancel["job"] is None:
            done = len(list(shard_dir.glob("shard-*.parquet")))
            if done >= max(1, batches // 4):
                watch.poll()
                running = [
                    j
                    for j in watch.jobs.values()
                    if j["partition"] == victim_class and j["state"] == "RUNNING"
                ]
                if running:
                    job = running[0]["job_id"]
                    subprocess.run([slurm.cmd("scancel"), job], env=slurm.env, check=True)
                    cancel = {"job": job, "shards_before": done, "at_s": round(time.perf_counter() - t0, 1)}
                    log(f"[slurm] scancel {job} ({victim_class}) after {done}/{batches} of its batches")
        time.sleep(0.2)
    if proc.poll() is None:
        log(f"[slurm] stopped at its deadline of {timeout:.0f} s")
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    rc = proc.wait()
    reader.join(10)
    timing = json.loads((out / "timing.json").read_text()) if (out / "timing.json").is_file() else {}
    return {
        "rc": rc,
        "wall_s": round(time.perf_counter() - t0, 1),
        "cancel": cancel,
        "timing": timing,
        "noticed_cancel": any(cancel["job"] and f"job {cancel['job']}" in ln for ln in lines),
    }


def check_rows(
    out: Path,
    classes: dict[str, dict],
    plans: dict[str, int],
    jobs: dict[str, dict],
    seen: dict[str, dict],
    cards: list[dict],
    cpu: bool,
) -> tuple[dict, list[dict]]:
    """Exactly-once per class, and each job's rows against SLURM's GPU for that job."""
    by_index = {str(c["index"]): c for c in cards}
    checks, table = {}, []
    for cls, c in classes.items():
        rows = shard_rows(out, cls)
        ids = sorted(r["sample_id"] for r in rows)
        per_job: dict[str, list[dict]] = {}
        for r in rows:
            per_job.setdefault(r["slurm_job_id"], []).append(r)
        job_ok = []
        for job, jrows in sorted(per_job.items()):
            slurm_job = jobs.get(job, {})
            idx = slurm_job.get("gpu_idx")
            card = by_index.get(str(idx), {})
            cvd = sorted({r["cuda_visible_devices"] for r in jrows})
            pci = sorted({r["pci_bus_id"] for r in jrows})
            job_env = seen.get(job, {})
            ok = (
                slurm_job.get("partition") == c["partition"]
                and {r["slurm_partition"] for r in jrows} == {c["partition"]}
                and idx is not None
                and job_env.get("slurm_job_gpus") == str(idx)
                and job_env.get("cuda_visible_devices") == str(idx)
                and str(idx) == str(c["index"])
                # the numpy backend records no card (empty CVD and PCI): the rows' side is a GPU-only check
                and cvd == ([""] if cpu else [str(idx)])
                and pci == [card.get("pci_bus_id", "")]
            )
            job_ok.append(ok)
            table.append(
                {
                    "gpu_class": cls,
                    "job": job,
                    "partition": slurm_job.get("partition"),
                    "state": slurm_job.get("state"),
                    "slurm_gpu_idx": idx,
                    "job_env_SLURM_JOB_GPUS": job_env.get("slurm_job_gpus"),
                    "job_env_CUDA_VISIBLE_DEVICES": job_env.get("cuda_visible_devices"),
                    "rows": len(jrows),
                    "rows_cuda_visible_devices": "|".join(cvd),
                    "rows_pci_bus_id": "|".join(pci),
                    "nvidia_smi_pci_bus_id": card.get("pci_bus_id", ""),
                    "agree": ok,
                }
            )
        checks[cls] = {
            "rows": len(rows),
            "every_sample_once": ids == list(range(plans[cls])),
            "shards": len({r["shard"] for r in rows}),
            "one_shard_per_batch": all(r["shard"] == f"shard-{r['batch']}.parquet" for r in rows)
            and len({r["batch"] for r in rows}) == len({r["shard"] for r in rows}),
            "jobs": sorted(per_job),
            "every_job_agrees_with_slurm": bool(job_ok) and all(job_ok),
        }
    return checks, table


def read_job_env(path: Path) -> dict[str, dict]:
    seen = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 4:
                seen[parts[0]] = {
                    "partition": parts[1],
                    "slurm_job_gpus": parts[2],
                    "cuda_visible_devices": parts[3],
                }
    return seen


def sps(timing: dict) -> float | None:
    return timing["rows"] / timing["seconds"] if timing.get("seconds") else None


def table(result: dict) -> str:
    lines = [
        f"SLURM {result['slurm']['version']} from .debs, {len(result['cards'])} GPUs as GRES types "
        f"{', '.join(result['classes'])}"
    ]
    for j in result["jobs"]:
        lines.append(
            f"  job {j['job']:>3} {j['gpu_class']:8} {j['state'] or '-':10} SLURM IDX {j['slurm_gpu_idx']}  "
            f"job env GPUS={j['job_env_SLURM_JOB_GPUS']} CVD={j['job_env_CUDA_VISIBLE_DEVICES']}  "
            f"rows {j['rows']:5d} CVD={j['rows_cuda_visible_devices']} pci={j['rows_pci_bus_id'] or '-'}  "
            f"{'agree' if j['agree'] else 'DISAGREE'}"
        )
    c = result["sweep"]["cancel"]
    lines.append(f"cancelled job {c['job']} after {c['shards_before']} shards at {c['at_s']} s")
    for cls, ch in result["checks"].items():
        lines.append(
            f"  {cls}: {ch['rows']} rows, every sample once: {ch['every_sample_once']}, "
            f"{ch['shards']} shards one per batch: {ch['one_shard_per_batch']}, "
            f"jobs {','.join(ch['jobs'])} agree with SLURM: {ch['every_job_agrees_with_slurm']}"
        )
    t = result["sweep"]["timing"]
    if t:
        lines.append(
            f"SLURM sweep: {t['rows']} configurations in {t['seconds']:.1f} s = {sps(t):.2f}/s "
            f"(whole command {result['sweep']['wall_s']:.1f} s, one cancel and its replacement included)"
        )
        for name, w in sorted((t.get("per_worker") or {}).items()):
            lines.append(
                f"  {name:12} {w['rows']:5d} rows {w.get('samples_per_s') or 0:7.2f}/s busy  "
                f"pci {w.get('pci_bus_id') or '-'}  CVD {w.get('cuda_visible_devices', '-')}"
            )
    loc = result.get("local")
    if loc and loc.get("timing"):
        lt = loc["timing"]
        lines.append(
            f"local cluster, same host: {lt['rows']} configurations in {lt['seconds']:.1f} s = "
            f"{sps(lt):.2f}/s (whole command {loc['wall_s']:.1f} s)"
        )
        if t:
            lines.append(f"SLURM / local samples per second: {sps(t) / sps(lt):.3f}")
    ref = result.get("local_reference")
    if ref:
        lines.append(f"committed local 2-card run (data/cfd/h200x2/multi_gpu_scaling): {ref:.2f}/s")
    lines.append("ALL CHECKS PASS" if result["ok"] else "SOME CHECK FAILED")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--debs", type=Path, default=REPO / ".slurm-debs", help="folder of .deb files")
    ap.add_argument("--work", type=Path, default=Path("/tmp/slurm_gpu"), help="SLURM, prefix, sweep folders")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    ap.add_argument("--cpu", action="store_true", help="numpy backend, small grid, fake GPU devices")
    ap.add_argument("--samples", type=int, help="random samples per class (overrides the spec)")
    ap.add_argument("--local", action="store_true", help="then the local cluster on the same spec and host")
    ap.add_argument("--budget-s", type=float, default=400, help="deadline for all steps together")
    args = ap.parse_args(argv)
    start = time.perf_counter()

    def left() -> float:
        return args.budget_s - (time.perf_counter() - start)

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    args.out.mkdir(parents=True, exist_ok=True)
    prefix = unpack(args.debs, args.work / "prefix", log=log)
    root = args.work / "slurm"
    root.mkdir()
    if args.cpu:
        cards = fake_devices(root, 2)
        base = "cpu"
        facts = {"peak_fp64_gflops": 1.0, "bandwidth_gbs": 1.0, "memory_gb": 1.0, "source": "CPU rehearsal"}
    else:
        from launchtune.kernels.device import gpu_class_of, spec_dict

        cards = gpus_of_host(2)
        for c in cards:
            c["file"] = f"/dev/nvidia{c['minor']}"
        base = gpu_class_of(cards[0]["name"])
        facts = {
            k: v
            for k, v in spec_dict(base).items()
            if k in ("peak_fp64_gflops", "bandwidth_gbs", "memory_gb")
        }
        facts["source"] = f"kernels/device.py CLASS_SPECS[{base!r}]"
    classes = {
        f"{base}{s}": {
            "partition": f"{base}{s}",
            "gres_type": f"{base}{s}",
            "index": c["index"],
            "file": c["file"],
        }
        for s, c in zip("ab", cards, strict=True)
    }
    mem_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.8)
    slurm = LocalSlurm(
        root,
        list(classes),
        prefix=prefix,
        gres=[(c["gres_type"], c["file"]) for c in classes.values()],
        memory_mb=mem_mb,
    )
    result: dict = {
        "cpu_mode": args.cpu,
        "cards": cards,
        "classes": classes,
        "multicast_env": {k: os.environ.get(k) for k in MULTICAST},
        "unpack": prefix.report(),
    }
    spec = load_yaml(SPEC)
    if args.cpu:
        spec.update(CPU_SPEC)
    if args.samples is not None:
        spec["samples"] = args.samples
    spec["name"] = "slurm_gpu"
    spec["gpu_classes"] = "auto"  # the classes of the cluster config
    spec_path = args.work / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    watch = JobWatch(slurm)
    try:
        t = time.perf_counter()
        slurm.start()
        result["slurm"] = {
            "version": prefix.report().get("slurm_version"),
            "start_s": round(time.perf_counter() - t, 1),
        }
        log(
            f"SLURM up in {result['slurm']['start_s']} s: "
            + subprocess.run(
                [slurm.cmd("sinfo"), "-h", "-o", "%P %G %T"], env=slurm.env, capture_output=True, text=True
            ).stdout.replace("\n", "; ")
        )
        cluster = cluster_yaml(args.work / "cluster.yaml", classes, args.cpu, args.work, facts)
        watch.start()
        per_class = spec["samples"] + (840 if "per_kernel_exhaustive" in spec["samplers"] else 0)
        batches = -(-per_class // spec["batch_size"])
        victim = next(iter(classes))
        local_need = 0 if not args.local else 60 + 2 * per_class / (60 if not args.cpu else 1)
        result["sweep"] = run_slurm_sweep(
            spec_path,
            cluster,
            args.work / "sweep",
            slurm,
            victim,
            batches,
            max(60, left() - local_need - 20),
            watch,
        )
        watch.stop.set()
        watch.join(5)
        watch.poll()
        plans = {}
        for cls in classes:
            plan = json.loads((args.work / "sweep" / "plan" / f"{cls}.json").read_text())
            plans[cls] = len(plan["configs"]) if "configs" in plan else plan.get("n_configs", per_class)
        seen = read_job_env(args.work / "job-gpus.txt")
        result["checks"], result["jobs"] = check_rows(
            args.work / "sweep", classes, plans, watch.jobs, seen, cards, args.cpu
        )
        result["slurm_jobs"] = watch.jobs
        result["job_env"] = seen
    finally:
        watch.stop.set()
        slurm.stop()
        with tarfile.open(args.out / "slurm-logs.tar.gz", "w:gz") as tar:
            for p in [
                root / "slurm.conf",
                root / "gres.conf",
                args.work / "cluster.yaml",
                args.work / "spec.yaml",
                root / "log",
                args.work / "sweep" / ".dask" / "slurm-logs",
                args.work / "job-gpus.txt",
            ]:
                if p.exists():
                    tar.add(p, arcname=p.name)
    c = result["sweep"]["cancel"]
    replaced = c["job"] and any(j != c["job"] for j in result["checks"][victim]["jobs"])
    result["cancel_mid_sweep"] = (
        bool(c["job"]) and c["shards_before"] < result["checks"][victim]["shards"] and bool(replaced)
    )
    if args.local and left() > 60:
        lspec = dict(spec, gpu_classes="auto", name="slurm_gpu_local")
        # the same number of configurations as both SLURM classes together
        lspec["samples"] = 2 * per_class - (per_class - spec["samples"])
        lpath = args.work / "spec-local.yaml"
        lpath.write_text(yaml.safe_dump(lspec, sort_keys=False))
        ids = [str(c["index"]) for c in cards]
        result["local"] = run_local_sweep("local", lpath, args.work / "local", 2, ids, args.cpu, left() - 10)
    if LOCAL_REFERENCE.exists() and not args.cpu:
        ref = json.loads(LOCAL_REFERENCE.read_text())
        result["local_reference"] = ref["scaling"]["samples_per_s_2"]
    result["ok"] = (
        result["sweep"]["rc"] == 0
        and all(
            ch["every_sample_once"] and ch["one_shard_per_batch"] and ch["every_job_agrees_with_slurm"]
            for ch in result["checks"].values()
        )
        and result["cancel_mid_sweep"]
    )
    result["seconds"] = round(time.perf_counter() - start, 1)
    (args.out / "slurm_gpu.json").write_text(json.dumps(result, indent=1, default=str))
    with open(args.out / "jobs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(result["jobs"][0]) if result["jobs"] else ["job"])
        w.writeheader()
        w.writerows(result["jobs"])
    log("\n" + table(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    run_main(main)
