"""The SLURM cluster config (``cluster_configs/slurm.yaml``): loading, checking, per-class job options.

Kept apart from :mod:`pipeline.cluster.slurm` so the dry run and the checks need no scheduler and no SLURM.
Every mistake is one line naming the file and the field (``slurm.yaml: classes.v100.walltime: ...``).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dask.utils import parse_bytes

from launchtune.kernels.device import CLASS_SPEC_ENV, CLASS_SPECS, spec_dict

from ..errors import UserError
from ..yamlio import check_keys, load_yaml

JOB_KEYS = (
    "gres",
    "cores",
    "memory",
    "walltime",
    "account",
    "job_directives",
    "setup",
    "python",
    "local_directory",
)
CLASS_KEYS = ("partition", "device", *JOB_KEYS)
SCHEDULER_KEYS = ("interface", "dashboard", "tls", "max_job_failures", "release_idle_after_s")
DEVICE_KEYS = ("peak_fp64_gflops", "bandwidth_gbs", "memory_gb", "source")
_CLASS_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
_WALLTIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


@dataclass(frozen=True)
class ClassJob:
    """What one GPU class's worker jobs ask SLURM for, and what is known about its GPU up front."""

    gpu_class: str
    partition: str
    gres: str | None
    cores: int
    memory: str
    walltime: str
    account: str | None
    job_directives: list[str]
    setup: list[str]
    python: str | None
    local_directory: str | None
    device: dict[str, Any]

    @property
    def walltime_s(self) -> int:
        return walltime_seconds(self.walltime)


@dataclass(frozen=True)
class SlurmConfig:
    path: Path
    classes: dict[str, ClassJob]
    interface: str | None = None
    dashboard: str | None = "127.0.0.1:8787"
    tls: bool = True
    max_job_failures: int = 3
    release_idle_after_s: float = 60.0

    def select(self, gpu_classes: list[str] | None, where: str = "--gpu-class") -> list[ClassJob]:
        """The entries for ``gpu_classes`` (all when None); an unknown class is a user error naming
        ``where`` the classes came from (the flag, or the spec file's ``gpu_classes``)."""
        if not gpu_classes:
            return list(self.classes.values())
        unknown = [c for c in gpu_classes if c not in self.classes]
        if unknown:
            raise UserError(
                f"{where}: GPU class {unknown[0]!r} has no entry in {self.path} "
                f"(its classes: {', '.join(self.classes)})"
            )
        return [self.classes[c] for c in dict.fromkeys(gpu_classes)]


def walltime_seconds(text: str) -> int:
    """SLURM times (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS``) in seconds."""
    m = _WALLTIME.match(str(text).strip())
    if not m:
        raise ValueError(text)
    days, a, b, c = m.groups()
    if days is None:
        # MM, MM:SS, HH:MM:SS
        parts = [int(x) for x in (a, b, c) if x is not None]
        if len(parts) == 1:
            return parts[0] * 60
        if len(parts) == 2:
            return parts[0] * 60 + parts[1]
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    hours, minutes, seconds = int(a), int(b or 0), int(c or 0)
    return int(days) * 86400 + hours * 3600 + minutes * 60 + seconds


def _str_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: expected a list of strings")
    return list(value)


def _opt_str(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise UserError(f"{where}: expected a string")
    return str(value)


def _class_job(name: str, entry: dict[str, Any], defaults: dict[str, Any], where: str) -> ClassJob:
    if not isinstance(entry, dict):
        raise UserError(f"{where}: expected a mapping with at least 'partition'")
    check_keys(entry, where, required=("partition",), optional=CLASS_KEYS)
    merged = {**defaults, **entry}
    cores = merged.get("cores", 1)
    if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
        raise UserError(f"{where}.cores: expected a positive whole number of CPUs, got {cores!r}")
    memory = str(merged.get("memory", "4GB"))
    try:
        if parse_bytes(memory) <= 0:
            raise ValueError
    except (ValueError, TypeError):
        raise UserError(f"{where}.memory: expected a size such as 16GB, got {memory!r}") from None
    walltime = str(merged.get("walltime", "01:00:00"))
    try:
        if walltime_seconds(walltime) <= 0:
            raise ValueError
    except ValueError:
        raise UserError(
            f"{where}.walltime: expected a SLURM time such as 02:00:00 or 1-00:00:00, got {walltime!r}"
        ) from None
    partition = _opt_str(entry["partition"], f"{where}.partition")
    if not partition:
        raise UserError(f"{where}.partition: must name a SLURM partition")
    gres = _opt_str(merged.get("gres"), f"{where}.gres")
    device = entry.get("device")
    if device is None:
        if name not in CLASS_SPECS:
            raise UserError(
                f"{where}.device: class {name!r} is not in kernels/device.py CLASS_SPECS, so give "
                "its peak_fp64_gflops, bandwidth_gbs and memory_gb"
            )
        device = spec_dict(name)
    else:
        if not isinstance(device, dict):
            raise UserError(f"{where}.device: expected a mapping")
        check_keys(device, f"{where}.device", required=DEVICE_KEYS[:3], optional=DEVICE_KEYS[3:])
        for key in DEVICE_KEYS[:3]:
            if not isinstance(device[key], int | float) or isinstance(device[key], bool) or device[key] <= 0:
                raise UserError(f"{where}.device.{key}: expected a positive number, got {device[key]!r}")
        device = {"source": f"{where}.device", **device}
    return ClassJob(
        gpu_class=name,
        partition=partition,
        gres=gres,
        cores=cores,
        memory=memory,
        walltime=walltime,
        account=_opt_str(merged.get("account"), f"{where}.account"),
        job_directives=_str_list(merged.get("job_directives"), f"{where}.job_directives"),
        setup=_str_list(merged.get("setup"), f"{where}.setup"),
        python=_opt_str(merged.get("python"), f"{where}.python"),
        local_directory=_opt_str(merged.get("local_directory"), f"{where}.local_directory"),
        device=dict(device),
    )


def load_slurm_config(path: str | Path) -> SlurmConfig:
    """Read and check a SLURM cluster config; every error names the file and the field."""
    path = Path(path)
    data = load_yaml(path)
    name = path.name
    check_keys(data, name, required=("classes",), optional=("scheduler", "defaults", "kind"))
    if data.get("kind", "slurm") != "slurm":
        raise UserError(f"{name}: kind: expected 'slurm', got {data['kind']!r}")
    scheduler = data.get("scheduler") or {}
    if not isinstance(scheduler, dict):
        raise UserError(f"{name}: scheduler: expected a mapping")
    check_keys(scheduler, f"{name}: scheduler", optional=SCHEDULER_KEYS)
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise UserError(f"{name}: defaults: expected a mapping")
    check_keys(defaults, f"{name}: defaults", optional=JOB_KEYS)
    classes = data["classes"]
    if not isinstance(classes, dict) or not classes:
        raise UserError(f"{name}: classes: expected a mapping of GPU class names to job templates")
    jobs = {}
    for cls, entry in classes.items():
        if not isinstance(cls, str) or not _CLASS_NAME.match(cls):
            raise UserError(
                f"{name}: classes.{cls}: class names are lower-case letters, digits, '-' and '_' "
                "(they name Dask resources and result partitions)"
            )
        jobs[cls] = _class_job(cls, entry, defaults, f"{name}: classes.{cls}")
    tls = scheduler.get("tls", True)
    if not isinstance(tls, bool):
        raise UserError(f"{name}: scheduler.tls: expected true or false, got {tls!r}")
    failures = scheduler.get("max_job_failures", 3)
    if not isinstance(failures, int) or isinstance(failures, bool) or failures < 1:
        raise UserError(
            f"{name}: scheduler.max_job_failures: expected a positive whole number, got {failures!r}"
        )
    idle = scheduler.get("release_idle_after_s", 60)
    if not isinstance(idle, int | float) or isinstance(idle, bool) or idle < 0:
        raise UserError(f"{name}: scheduler.release_idle_after_s: expected seconds >= 0, got {idle!r}")
    dashboard = scheduler.get("dashboard", "127.0.0.1:8787")
    if dashboard is not None and not re.match(r"^[\w.\-\[\]:]*:\d+$", str(dashboard)):
        raise UserError(
            f"{name}: scheduler.dashboard: expected HOST:PORT (e.g. 127.0.0.1:8787) or null, "
            f"got {dashboard!r}"
        )
    return SlurmConfig(
        path=path,
        classes=jobs,
        interface=_opt_str(scheduler.get("interface"), f"{name}: scheduler.interface"),
        dashboard=None if dashboard is None else str(dashboard),
        tls=tls,
        max_job_failures=failures,
        release_idle_after_s=float(idle),
    )


def lifetime_args(walltime_s: int) -> list[str]:
    """Let a worker retire before SLURM kills it at walltime, so its running batch moves on cleanly.

    dask-jobqueue's recipe (``--lifetime`` a little under the walltime, staggered so all workers do not leave
    at once); the cluster then submits a replacement job. Very short walltimes get no lifetime: the margin
    would eat the job.
    """
    if walltime_s < 600:
        return []
    margin = max(120, walltime_s // 20)
    stagger = min(300, margin // 2)
    return ["--lifetime", f"{walltime_s - margin}s", "--lifetime-stagger", f"{stagger}s"]


def site_class_exports(job: ClassJob) -> list[str]:
    """For a class the registry lacks, the set-up line that hands its ``device:`` facts to the worker, so they
    reach every row it writes (``launchtune.kernels.device.class_spec``)."""
    if job.gpu_class in CLASS_SPECS:
        return []
    facts = {k: job.device[k] for k in DEVICE_KEYS if k in job.device}
    return [f"export {CLASS_SPEC_ENV}={shlex.quote(json.dumps(facts, sort_keys=True))}"]


def job_options(job: ClassJob, *, job_name: str, log_directory: str | None) -> dict[str, Any]:
    """Class-specific keyword arguments of dask-jobqueue's ``SLURMJob`` (the cluster adds address, TLS)."""
    directives = ([f"--gres={job.gres}"] if job.gres else []) + list(job.job_directives)
    return dict(
        queue=job.partition,
        account=job.account,
        cores=job.cores,
        processes=1,
        memory=job.memory,
        walltime=job.walltime,
        job_name=job_name,
        job_extra_directives=directives,
        job_script_prologue=list(job.setup) + site_class_exports(job),
        # --no-dashboard: a worker's own HTTP pages would listen on the node's network, unauthenticated;
        # the scheduler's dashboard (loopback) shows the workers anyway.
        worker_extra_args=[
            "--resources",
            f"{job.gpu_class}=1",
            "--no-dashboard",
            *lifetime_args(job.walltime_s),
        ],
        log_directory=log_directory,
        python=job.python or sys.executable,
        local_directory=job.local_directory,
    )
