"""SLURM through dask-jobqueue: one scheduler on the login node, one job template per GPU class.

Why one cluster with per-class templates rather than one ``SLURMCluster`` per class: a sweep is one Dask
graph (measure batches of every class, then merge, train, validate) and a client talks to one scheduler, so
every class's workers must join the same scheduler. ``ClassSLURMCluster`` is a ``SLURMCluster`` whose
``worker_spec`` holds entries of several classes, each built from its class's template (partition, GRES,
cores, memory, walltime, set-up lines) and carrying the Dask resource ``<class>=1``, so a task submitted with
``resources={"v100": 1}`` only runs on a v100 job.

``ClassScaler`` (a thread) sizes each class to its demand once a second: ``min(workers per class, unfinished
tasks that need the class)``. So a class no task needs submits no job; a class whose batches are all done
retires its workers (their data moved to others first) and its jobs are cancelled; a job that ends early
(``scancel``, walltime, node failure) is replaced while the scheduler hands its running batch to another
worker. Batches are idempotent shards written atomically by the pipeline, so a retried batch is neither lost
nor doubled. (Dask also recomputes finished results that lived only on the lost worker while the client still
holds their futures; such a batch rewrites its own shard, so the data stays exactly once.) Jobs that exit
before their worker ever connects (a broken set-up line) are counted; after ``max_job_failures`` the sweep
stops with the job's log file named. Every job is cancelled on exit, also on Ctrl-C, SIGTERM and errors.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import dask
from distributed import Client

from ..errors import UserError
from . import ClusterHandle
from .jobqueue_compat import SLURMCluster, job_kwargs, submit_and_retire
from .scaling import jobs_to_add, release_idle
from .security import Credentials, security_from_files, sweep_credentials
from .slurm_config import ClassJob, SlurmConfig, job_options, load_slurm_config
from .usage import WorkerUsage

logger = logging.getLogger(__name__)

# SLURM job states in which the job still holds (or waits for) its allocation.
ACTIVE_STATES = {
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
}
SQUEUE_PERIOD_S = 3.0


class ClassSLURMCluster(SLURMCluster):
    """A ``SLURMCluster`` whose workers come from per-class job templates (see the module docstring)."""

    def __init__(self, templates: dict[str, dict[str, Any]], **kwargs: Any):
        self.templates = templates
        first = next(iter(templates.values()))
        super().__init__(n_workers=0, **{**first, **kwargs})

    def options_for(self, gpu_class: str) -> dict[str, Any]:
        return {**job_kwargs(self), **self.templates[gpu_class]}

    def add_worker_spec(self, gpu_class: str, name: str) -> None:
        self.worker_spec[name] = {"cls": self.job_cls, "options": self.options_for(gpu_class)}

    def scale(self, n=None, jobs=0, memory=None, cores=None):  # noqa: D102 - guard, see message
        if n or jobs or memory or cores:  # scale(0) is how SpecCluster closes; anything else is a mistake
            raise RuntimeError("ClassSLURMCluster is sized per class by ClassScaler; do not call scale()")
        return super().scale(0)

    def adapt(self, *args, **kwargs):  # noqa: D102
        raise RuntimeError("ClassSLURMCluster is sized per class by ClassScaler; do not call adapt()")


class ClassScaler:
    """Keeps each class's job count at its demand; replaces jobs that end early; remembers every job id."""

    def __init__(
        self,
        cluster: ClassSLURMCluster,
        config: SlurmConfig,
        classes: Sequence[str],
        workers_per_class: int,
        log: Callable[[str], None],
        usage: WorkerUsage,
        interval: float = 1.0,
    ):
        self.cluster = cluster
        self.usage = usage
        self.config = config
        self.classes = list(classes)
        self.workers_per_class = workers_per_class
        self.log = log
        self.interval = interval
        self.error: UserError | None = None
        self.job_ids: set[str] = set()
        self.jobs: dict[
            str, dict[str, Any]
        ] = {}  # worker name -> {class, job_id, submitted, connected, ended}
        self._counter = dict.fromkeys(self.classes, 0)
        self._failures = dict.fromkeys(self.classes, 0)
        self._first_seen: dict[str, float] = {}
        self._idle_since: dict[str, float] = {}
        self._last_poll = 0.0
        self._states: dict[str, str] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm-class-scaler", daemon=True)

    # -- thread --
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                # The work runs on the cluster's event loop, where the scheduler and the jobs live.
                self.cluster.sync(self._tick)
            except UserError as exc:
                self._fail(exc)
                return
            except Exception as exc:  # sbatch refused a job, squeue failed, ...
                if self._stop.is_set():
                    return
                self._fail(UserError(f"{self.config.path}: SLURM cluster failed: {exc}".strip()))
                return

    def _fail(self, error: UserError) -> None:
        # The sweep's main thread waits on Dask futures; a real SIGINT wakes it (a flag alone would not), and
        # open_slurm_cluster turns the KeyboardInterrupt back into this error.
        self.error = error
        self.log(f"slurm: {error}")
        with suppress(Exception):
            os.kill(os.getpid(), signal.SIGINT)

    # -- one step, on the event loop --
    def _class_of(self, name: str) -> str:
        return name.rsplit("-", 1)[0]

    def _demand(self) -> dict[str, int]:
        demand = dict.fromkeys(self.classes, 0)
        for ts in self.cluster.scheduler.tasks.values():
            if ts.state in ("memory", "erred", "forgotten"):
                continue
            for cls in ts.resource_restrictions or ():
                if cls in demand:
                    demand[cls] += 1
        return demand

    async def _poll_squeue(self) -> dict[str, tuple[str, str]] | None:
        """Our jobs' (state, pending reason) as squeue sees them; None when squeue did not answer."""
        if not self.job_ids:
            return {}
        proc = await asyncio.create_subprocess_exec(
            "squeue",
            "-h",
            "--states=all",
            "-u",
            getpass.getuser(),
            "-o",
            "%i %T %r",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            return None  # a busy controller: judge nothing this time
        states = {}
        for line in out.decode().splitlines():
            parts = line.split(None, 2)
            if len(parts) >= 2:
                states[parts[0]] = (parts[1], parts[2].strip() if len(parts) == 3 else "")
        return states

    async def _tick(self) -> None:
        """One look at the cluster: workers that connected, jobs that ended (squeue, every SQUEUE_PERIOD_S),
        then jobs retired or added to meet the demand, and the new jobs' ids."""
        connected = {ws.name: ws for ws in self.cluster.scheduler.workers.values()}
        now = time.time()
        self._note_connected(connected, now)
        states, poll_started = None, 0.0
        if time.monotonic() - self._last_poll >= SQUEUE_PERIOD_S:
            poll_started = time.monotonic()
            states = await self._poll_squeue()
            self._last_poll = poll_started
        changed = self._follow_jobs(states, poll_started, now)
        changed |= await self._meet_demand(connected, now)
        if changed:
            await submit_and_retire(self.cluster)
            self._note_submitted()

    def _note_connected(self, connected: dict[str, Any], now: float) -> None:
        for name, rec in self.jobs.items():
            if rec["connected"] is None and (name in connected or name in self.usage.names_seen):
                rec["connected"] = now
                self.log(
                    f"slurm: worker {name} connected (job {rec['job_id']}, "
                    f"{now - rec['submitted']:.1f} s after submission)"
                )

    def _follow_jobs(
        self, states: dict[str, tuple[str, str]] | None, poll_started: float, now: float
    ) -> bool:
        """Each job of ours: dropped by the cluster, pending (and why), or ended (before its worker connected
        counts as a failure). True where a job left the cluster's spec."""
        cluster, spec = self.cluster, self.cluster.worker_spec
        changed = False
        for name in [n for n in spec if self._class_of(n) in self._counter]:
            job = cluster.workers.get(name)
            rec = self.jobs.get(name)
            if job is None:  # SpecCluster dropped it after its worker was lost (before squeue said why)
                del spec[name]
                changed = True
                if rec is not None and rec["ended"] is None:
                    rec["ended"], rec["state"] = now, "LOST"
                    self.log(
                        f"slurm: {self._class_of(name)}: job {rec['job_id']} lost its worker; its running "
                        "batch is retried on another worker"
                    )
                continue
            if job.job_id and job.job_id not in self.job_ids:
                self.job_ids.add(job.job_id)
                self._first_seen[job.job_id] = time.monotonic()
            if states is None or not job.job_id or rec is None:
                continue
            if self._first_seen.get(job.job_id, 1e300) >= poll_started:
                continue  # submitted after squeue answered
            state, reason = states.get(job.job_id, ("GONE", ""))
            if state == "PENDING" and reason and reason != rec.get("reason"):
                # A job that waits says why (Priority, Resources, or a request the partition cannot meet).
                rec["reason"] = reason
                self.log(f"slurm: {self._class_of(name)}: job {job.job_id} pending ({reason})")
            if state in ACTIVE_STATES:
                continue
            rec["ended"], rec["state"] = now, state
            self._job_ended(name, job, rec, state)
            del spec[name]
            changed = True
        return changed

    def _job_ended(self, name: str, job: Any, rec: dict[str, Any], state: str) -> None:
        cls = self._class_of(name)
        if rec["connected"] is None and name not in self.usage.names_seen:
            self._failures[cls] += 1
            logs = self._log_files(job)
            self.log(
                f"slurm: {cls}: job {job.job_id} ended ({state}) before its worker connected; log: {logs}"
            )
            if self._failures[cls] >= self.config.max_job_failures:
                raise UserError(
                    f"{self.config.path}: classes.{cls}: {self._failures[cls]} jobs ended before their "
                    f"Dask worker connected (check setup, python and partition); last job's log: {logs}"
                )
        else:
            self.log(
                f"slurm: {cls}: job {job.job_id} ended ({state}); its running batch is retried "
                "on another worker"
            )

    async def _meet_demand(self, connected: dict[str, Any], now: float) -> bool:
        """Idle classes give their jobs back, classes short of jobs get more. True where the spec changed."""
        spec, changed = self.cluster.worker_spec, False
        demand = self._demand()
        jobs = {cls: [n for n in spec if self._class_of(n) == cls] for cls in self.classes}
        counts = {cls: len(names) for cls, names in jobs.items()}
        for cls in release_idle(counts, demand, self._idle_since, now, self.config.release_idle_after_s):
            changed |= await self._retire(cls, jobs[cls], connected)
        for cls, missing in jobs_to_add(counts, demand, self.workers_per_class).items():
            for _ in range(missing):
                name = f"{cls}-{self._counter[cls]}"
                self._counter[cls] += 1
                self.cluster.add_worker_spec(cls, name)
                self.jobs[name] = {
                    "class": cls,
                    "job_id": None,
                    "submitted": now,
                    "connected": None,
                    "ended": None,
                    "state": None,
                }
                changed = True
        return changed

    def _note_submitted(self) -> None:
        for name, rec in self.jobs.items():
            job = self.cluster.workers.get(name)
            if rec["job_id"] is None and job is not None and job.job_id:
                rec["job_id"] = job.job_id
                self.job_ids.add(job.job_id)
                self._first_seen.setdefault(job.job_id, time.monotonic())
                partition = self.config.classes[rec["class"]].partition
                self.log(
                    f"slurm: {rec['class']}: job {job.job_id} submitted to partition {partition} "
                    f"(worker {name})"
                )

    async def _retire(self, cls: str, names: list[str], connected: dict[str, Any]) -> bool:
        """A class with nothing left to do gives its jobs back; its workers' data moves elsewhere first."""
        spec = self.cluster.worker_spec
        addresses = [connected[n].address for n in names if n in connected]
        retired: set[str] = set()
        if addresses:
            info = await self.cluster.scheduler.retire_workers(
                workers=addresses, close_workers=True, remove=True
            )
            retired = {w.get("name") for w in info.values()}
        gone = [n for n in names if n in retired or n not in connected]
        for name in gone:
            del spec[name]
            rec = self.jobs.get(name)
            if rec is not None and rec["ended"] is None:
                rec["ended"], rec["state"] = time.time(), "RETIRED"
        if gone:
            self.log(f"slurm: {cls}: no work left; released {len(gone)} job(s)")
        return bool(gone)

    def _log_files(self, job: Any) -> str:
        directory = getattr(job, "log_directory", None)
        if not directory:
            return "(no log directory)"
        return str(Path(directory) / f"{job.job_name}-{job.job_id}.err")


def _check_slurm(config: SlurmConfig, jobs: Sequence[ClassJob]) -> None:
    """Fail before anything starts where this is no SLURM login node or a partition does not exist."""
    if not shutil.which("sbatch") or not shutil.which("squeue"):
        raise UserError(
            f"--cluster {config.path}: sbatch/squeue not found; a SLURM sweep runs on a login node "
            "(use --cluster local elsewhere)"
        )
    out = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise UserError(f"--cluster {config.path}: sinfo failed: {out.stderr.strip() or out.returncode}")
    partitions = set(out.stdout.split())
    if config.interface:
        import psutil

        names = sorted(psutil.net_if_addrs())
        if config.interface not in names:
            raise UserError(
                f"{config.path}: scheduler.interface: no interface {config.interface!r} on this host "
                f"(it has: {', '.join(names)})"
            )
    for job in jobs:
        if job.partition not in partitions:
            raise UserError(
                f"{config.path}: classes.{job.gpu_class}.partition: SLURM has no partition "
                f"{job.partition!r} (sinfo lists: {', '.join(sorted(partitions)) or 'none'})"
            )


def _dashboard_line(cluster: ClassSLURMCluster, address: str | None) -> str:
    server = getattr(cluster.scheduler, "http_server", None)
    port = getattr(server, "port", None)
    if not port:
        return "not running"
    bound = str(address or "").rsplit(":", 1)[0] or "0.0.0.0"
    login = socket.gethostname()
    if bound in ("127.0.0.1", "localhost", "::1", "[::1]"):
        return (
            f"http://127.0.0.1:{port}/status (on this host; from your machine: "
            f"ssh -N -L {port}:127.0.0.1:{port} {getpass.getuser()}@{login}, then open that address)"
        )
    return f"http://{login}:{port}/status (open to the cluster network)"


def _cancel_leftovers(job_ids: set[str], log: Callable[[str], None]) -> None:
    """Belt and braces after cluster.close(): cancel, by id, any job of ours SLURM still lists as active."""
    if not job_ids:
        return
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i %T", "-u", getpass.getuser()], capture_output=True, text=True, timeout=60
    )
    left = sorted(
        i
        for i, s in (line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
        if i in job_ids and s in ACTIVE_STATES
    )
    if left:
        log(f"slurm: cancelling {len(left)} job(s) left behind: {' '.join(left)}")
        subprocess.run(["scancel", *left], capture_output=True, timeout=60)


@contextmanager
def _signals_raise_interrupt() -> Iterator[None]:
    """SIGTERM/SIGHUP (a closed login shell, a killed session) unwind like Ctrl-C, so jobs get cancelled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def build_cluster(
    config: SlurmConfig, jobs: Sequence[ClassJob], workdir: Path, credentials: Credentials | None
) -> ClassSLURMCluster:
    log_dir = workdir / "slurm-logs"
    # Job names carry the sweep folder's name (not the hidden ".dask" in it), so squeue shows whose they are.
    folder = next(
        (p.name for p in (workdir.resolve(), *workdir.resolve().parents) if p.name[:1] not in ("", ".")), ""
    )
    tag = re.sub(r"[^A-Za-z0-9_-]+", "-", folder)[:24] or "sweep"
    templates = {
        j.gpu_class: job_options(j, job_name=f"lt-{tag}-{j.gpu_class}", log_directory=str(log_dir))
        for j in jobs
    }
    scheduler_options: dict[str, Any] = {"dashboard_address": config.dashboard or ":0"}
    if config.interface:
        scheduler_options["interface"] = config.interface
    security = credentials.security if credentials else None
    return ClassSLURMCluster(
        templates,
        interface=config.interface,
        protocol="tls://" if security else "tcp://",
        security=security,
        scheduler_options=scheduler_options,
    )


@contextmanager
def open_slurm_cluster(
    config_path: Path,
    gpu_classes: Sequence[str] | None,
    workers_per_class: int,
    workdir: Path,
    log: Callable[[str], None] = logger.info,
) -> Iterator[ClusterHandle]:
    """Start the scheduler here and submit workers per class as tasks need them; always cancel every job."""
    config = load_slurm_config(config_path)
    jobs = config.select(list(gpu_classes) if gpu_classes else None)
    if workers_per_class < 1:
        raise UserError(f"workers per class must be at least 1, got {workers_per_class}")
    _check_slurm(config, jobs)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    classes = [j.gpu_class for j in jobs]

    with _signals_raise_interrupt(), _credentials_or_none(config, workdir) as credentials:
        # A batch killed with its job counts against allowed-failures; leave headroom for walltime kills.
        with dask.config.set({"distributed.scheduler.allowed-failures": 5}):  # read when the scheduler starts
            cluster = build_cluster(config, jobs, workdir, credentials)
        scaler = None
        usage = WorkerUsage()
        client = None
        try:
            cluster.sync(_add_plugin, cluster, usage)
            client = Client(cluster, security=credentials.security if credentials else None)
            scaler = ClassScaler(cluster, config, classes, workers_per_class, log, usage)
            scaler.start()
            dashboard = _dashboard_line(cluster, config.dashboard)
            log(
                f"slurm: scheduler {cluster.scheduler.address} "
                + (
                    f"(TLS; per-sweep credentials in {credentials.directory})"
                    if credentials
                    else "(NO TLS: scheduler.tls is false)"
                )
            )
            log(
                f"slurm: classes {', '.join(classes)}: up to {workers_per_class} job(s) each, "
                f"logs in {workdir / 'slurm-logs'}"
            )
            log(f"slurm: dashboard {dashboard}")
            facts = {j.gpu_class: {"partition": j.partition, **j.device} for j in jobs}
            yield ClusterHandle(
                client=client, kind="slurm", gpu_classes=classes, dashboard=dashboard, facts=facts
            )
        except KeyboardInterrupt:
            if scaler is not None and scaler.error is not None:
                raise scaler.error from None
            raise
        finally:
            if scaler is not None:
                scaler.stop()
            summary = usage.summary()
            if scaler is not None:
                summary["jobs"] = scaler.jobs
            with suppress(Exception):
                (workdir / "cluster-usage.json").write_text(json.dumps(summary, indent=1, default=str))
            if summary["worker_connected_s"] > 0:
                share = summary["busy_share"] or 0.0
                log(
                    f"slurm: {len(summary['workers'])} worker(s), "
                    f"{summary['worker_connected_s']:.0f} s connected, "
                    f"{100 * share:.0f}% of it computing"
                )
            if client is not None:
                with suppress(Exception):
                    client.close(timeout=20)
            with suppress(Exception):
                cluster.close(timeout=60)  # cancels each job (scancel)
            if scaler is not None:
                with suppress(Exception):
                    _cancel_leftovers(scaler.job_ids, log)


@contextmanager
def _credentials_or_none(config: SlurmConfig, workdir: Path) -> Iterator[Credentials | None]:
    if not config.tls:
        yield None
        return
    with sweep_credentials(workdir) as credentials:
        yield credentials


async def _add_plugin(cluster: ClassSLURMCluster, plugin: WorkerUsage) -> None:
    cluster.scheduler.add_plugin(plugin)


def dry_run_scripts(
    config_path: Path,
    gpu_classes: Sequence[str] | None,
    workdir: str = "<workdir>",
) -> list[tuple[ClassJob, str]]:
    """The job script each class would submit, without a scheduler, credentials or SLURM (for the dry run)."""
    from dask_jobqueue.slurm import SLURMJob

    config = load_slurm_config(config_path)
    jobs = config.select(list(gpu_classes) if gpu_classes else None)
    security = None
    if config.tls:
        security = security_from_files(
            f"{workdir}/credentials/sweep-cert.pem", f"{workdir}/credentials/sweep-key.pem"
        )
    protocol = "tls://" if security else "tcp://"
    out = []
    with tempfile.TemporaryDirectory() as tmp:  # SLURMJob creates its log folder; show the sweep's instead
        for job in jobs:
            opts = job_options(job, job_name=f"lt-<sweep>-{job.gpu_class}", log_directory=tmp)
            script = SLURMJob(
                f"{protocol}<scheduler-address>:<port>",
                name=f"{job.gpu_class}-N",
                interface=config.interface,
                protocol=protocol,
                security=security,
                **opts,
            ).job_script()
            out.append((job, script.replace(tmp, f"{workdir}/slurm-logs")))
    return out
