"""A real single-node SLURM on localhost, for integration tests (Debian's slurm-wlm and munge).

Everything it writes lives in one private folder (config, state, spool, logs, pid files) and it listens on
free ports, so it never touches /etc/slurm or a SLURM that is already running; client commands find it
through the ``SLURM_CONF`` variable in :attr:`LocalSlurm.env`. Facts that make it work in a container as
root (slurm-wlm 22.05, Debian 12): /run/munge must belong to ``munge`` before munged starts as that user; no
cgroups (``proctrack/linuxproc``, ``task/none``, and no cgroup.conf: 22.05 has no ``CgroupPlugin=disabled``);
a fake GPU GRES backed by one plain file per GPU (slurmd refuses the same file twice), so SLURM schedules
``--gres=gpu:1`` as on a GPU cluster.

Two more ways to run it, both for the GPU host that has no package registry (``benchmarks/slurm_gpu.py``):
``prefix=`` takes SLURM and munge from .deb files unpacked into a private folder (:mod:`tests.slurm.debs`):
``PluginDir`` and ``slurmd -d`` point there, and munged runs as root with its key, socket and logs in this
folder (``AuthInfo=socket=``), so nothing outside the folder is written. ``gres=`` names real device files
(``/dev/nvidia0``), optionally typed (``Name=gpu Type=h200a File=/dev/nvidia0``), instead of fake ones.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tests.slurm.debs import Prefix

PACKAGES = ("slurm-wlm", "munge")
SLURM_BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def why_impossible() -> str | None:
    """Why a local SLURM cannot be started here (None if it can): the reason a test skips with."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "a local SLURM needs Linux"
    if os.geteuid() != 0:
        return "a local SLURM needs root (slurmd runs jobs as their users); CI runs as root"
    if not all(shutil.which(b) for b in SLURM_BINARIES) and not shutil.which("apt-get"):
        return "slurm-wlm is not installed and there is no apt-get to install it"
    return None


def ensure_installed(log=print) -> None:
    """Install slurm-wlm and munge with apt-get where they are missing (about 15 s; the package list once)."""
    if all(shutil.which(b) for b in SLURM_BINARIES + ("munged",)):
        return
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    log("installing " + " ".join(PACKAGES) + " with apt-get")
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=True)
        subprocess.run(cmd, env=env, capture_output=True, check=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _munge_works() -> bool:
    if not shutil.which("munge"):
        return False
    cred = subprocess.run(["munge", "-n"], capture_output=True)
    if cred.returncode != 0:
        return False
    return subprocess.run(["unmunge"], input=cred.stdout, capture_output=True).returncode == 0


class LocalSlurm:
    """One node, one partition per entry of ``partitions``, every partition on that node.

    ``cpus`` defaults to the machine's real CPU count (slurmd refuses a node that claims more than it has).
    ``gpus`` fake GPUs are declared as GRES ``gpu`` so job scripts asking ``--gres=gpu:1`` are scheduled as
    on a GPU cluster.
    """

    def __init__(
        self,
        root: Path,
        partitions: Sequence[str],
        cpus: int | None = None,
        gpus: int = 4,
        *,
        prefix: Prefix | None = None,
        gres: Sequence[tuple[str | None, str]] | None = None,
        memory_mb: int | None = None,
    ):
        """``gres``: (type or None, device file) per GPU, in index order; None: ``gpus`` untyped fake files.
        ``prefix``: SLURM and munge unpacked from .debs; None: the installed ones and the system's munged."""
        self.root = Path(root)
        self.partitions = list(partitions)
        self.cpus = cpus or os.cpu_count() or 1
        self.prefix = prefix
        self.gres = list(gres) if gres is not None else None
        self.gpus = len(self.gres) if self.gres is not None else gpus
        self.memory_mb = memory_mb
        self._made_cgroups: list[Path] = []  # cgroup folders made for slurmd (prefix mode), removed on stop
        self.host = socket.gethostname().split(".")[0]
        self.conf = self.root / "slurm.conf"
        self.jobcomp = self.root / "jobcomp.txt"
        self._procs: list[int] = []  # pids of the daemons we started (munged only when we started it)
        self._munged_pid_file = Path(
            "/run/munge/launchtune-test-munged.pid"
        )  # munge must be able to write it

    @property
    def env(self) -> dict[str, str]:
        """Environment for client commands and for processes that submit jobs (SLURM_CONF)."""
        env = self.prefix.env() if self.prefix else dict(os.environ)
        return dict(env, SLURM_CONF=str(self.conf))

    def cmd(self, name: str) -> str:
        """The path (or PATH name) of a SLURM or munge command."""
        return str(self.prefix.command(name)) if self.prefix else name

    @property
    def munge_socket(self) -> Path | None:
        return self.root / "munge" / "munge.sock" if self.prefix else None

    def _write_config(self) -> None:
        for d in ("state", "spool", "log"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        ctld_port, slurmd_port = _free_port(), _free_port()
        phys_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
        mem_mb = self.memory_mb or int(phys_mb * 0.9)
        if self.gres is None:
            # slurmd wants one distinct file per GPU; plain files stand in for /dev/nvidiaN (never opened)
            devices: list[tuple[str | None, str]] = []
            for i in range(self.gpus):
                fake = self.root / f"fake-nvidia{i}"
                fake.touch()
                devices.append((None, str(fake)))
        else:
            devices = self.gres
        counts: dict[str | None, int] = {}
        for kind, _ in devices:
            counts[kind] = counts.get(kind, 0) + 1
        gres = ",".join(f"gpu:{k}:{n}" if k else f"gpu:{n}" for k, n in counts.items())
        lines = [
            "ClusterName=launchtune-test",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            *(
                [f"AuthInfo=socket={self.munge_socket}", f"PluginDir={self.prefix.plugin_dir}"]
                if self.prefix
                else []
            ),
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1",
            "MpiDefault=none",
            "ReturnToService=2",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp}",
            # Finished jobs stay visible to squeue/scontrol for a while, so tests can look them up.
            "MinJobAge=600",
            "KillWait=5",
            "InactiveLimit=0",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool'}",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'slurmd.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.root / 'log' / 'slurmd.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "GresTypes=gpu",
            f"NodeName={self.host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={mem_mb}"
            + (f" Gres={gres}" if gres else "")
            + " State=UNKNOWN",
        ]
        for i, part in enumerate(self.partitions):
            default = "YES" if i == 0 else "NO"
            lines.append(
                f"PartitionName={part} Nodes={self.host} Default={default} MaxTime=INFINITE State=UP"
                " OverSubscribe=NO"
            )
        self.conf.write_text("\n".join(lines) + "\n")
        if self.prefix:
            # slurmd 22.05 always starts its cgroup plugin; on a cgroup v2 host without systemd (the GPU VM)
            # cgroup/v2 asks systemd over D-Bus for a scope and stops slurmd when none answers, unless told to
            # make the scope itself
            # make the scope itself (IgnoreSystemd), in a system.slice made here if the host has none
            (self.root / "cgroup.conf").write_text("IgnoreSystemd=yes\n")
            cg = Path("/sys/fs/cgroup")
            if (cg / "cgroup.controllers").exists() and not (cg / "system.slice").exists():
                (cg / "system.slice").mkdir()
                self._made_cgroups.append(cg / "system.slice")
        (self.root / "gres.conf").write_text(
            "".join(
                f"NodeName={self.host} Name=gpu" + (f" Type={kind}" if kind else "") + f" File={path}\n"
                for kind, path in devices
            )
        )

    def _start_private_munge(self) -> None:
        """munged from the prefix, as root, everything in ``root/munge`` (0755: munged wants the socket's
        folder searchable by all); the key made there, 0600."""
        d = self.root / "munge"
        d.mkdir(mode=0o755, exist_ok=True)
        d.chmod(0o755)
        self.root.chmod(0o755)
        key = d / "munge.key"
        if not key.exists():
            subprocess.run([self.cmd("mungekey"), "--create", "--keyfile", str(key)], check=True)
        pid_file = d / "munged.pid"
        sock = str(self.munge_socket)
        subprocess.run(
            [
                self.cmd("munged"),
                f"--socket={sock}",
                f"--key-file={key}",
                f"--pid-file={pid_file}",
                f"--log-file={d / 'munged.log'}",
                f"--seed-file={d / 'munged.seed'}",
            ],
            check=True,
        )
        for _ in range(50):
            cred = subprocess.run([self.cmd("munge"), "-n", "-S", sock], capture_output=True)
            back = subprocess.run([self.cmd("unmunge"), "-S", sock], input=cred.stdout, capture_output=True)
            if cred.returncode == 0 and back.returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"munged did not come up; see {d / 'munged.log'}")
        self._procs.append(self._read_pid("munge/munged.pid"))

    def _start_munge(self) -> None:
        if self.prefix:
            self._start_private_munge()
            return
        if _munge_works():
            return
        run = Path("/run/munge")
        run.mkdir(parents=True, exist_ok=True)
        shutil.chown(run, "munge", "munge")
        subprocess.run(
            ["install", "-d", "-o", "munge", "-g", "munge", "/var/log/munge", "/var/lib/munge"], check=True
        )
        if not Path("/etc/munge/munge.key").exists():
            subprocess.run(["mungekey", "--create"], check=True)
            shutil.chown("/etc/munge/munge.key", "munge", "munge")
        subprocess.run(
            ["runuser", "-u", "munge", "--", "munged", "--pid-file", str(self._munged_pid_file)]
            if shutil.which("runuser")
            else ["su", "-s", "/bin/sh", "munge", "-c", f"munged --pid-file {self._munged_pid_file}"],
            check=True,
        )
        for _ in range(50):
            if _munge_works():
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("munged did not come up")
        if self._munged_pid_file.exists():
            self._procs.append(int(self._munged_pid_file.read_text().split()[0]))

    def start(self, timeout: float = 60.0) -> None:
        """Start munged (if none answers), slurmctld and slurmd; return when the node is idle."""
        self.root.mkdir(parents=True, exist_ok=True)
        self._write_config()
        self._start_munge()
        env = self.env
        subprocess.run([self.cmd("slurmctld"), "-f", str(self.conf)], env=env, check=True)
        self._procs.append(self._read_pid("slurmctld.pid"))
        stepd = ["-d", self.cmd("slurmstepd")] if self.prefix else []  # its compiled-in path is /usr/sbin
        subprocess.run([self.cmd("slurmd"), "-f", str(self.conf), *stepd], env=env, check=True)
        self._procs.append(self._read_pid("slurmd.pid"))
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            out = subprocess.run(
                [self.cmd("sinfo"), "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True
            )
            state = out.stdout.strip()
            if out.returncode == 0 and state and all(s.startswith("idle") for s in state.split()):
                return
            time.sleep(0.5)
        raise RuntimeError(
            f"SLURM node not idle after {timeout:.0f} s (state {state!r}); logs in {self.root}/log"
        )

    def _read_pid(self, name: str, timeout: float = 10.0) -> int:
        path = self.root / name
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().strip():
                return int(path.read_text().split()[0])
            time.sleep(0.1)
        raise RuntimeError(f"{path} not written; see {self.root}/log")

    def stop(self) -> None:
        """Cancel every job left, then end the daemons this object started (by pid, newest first)."""
        subprocess.run(
            [self.cmd("scancel"), "--full", "--partition", ",".join(self.partitions)],
            env=self.env,
            capture_output=True,
        )
        for pid in reversed(self._procs):
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        self._procs.clear()
        for d in reversed(self._made_cgroups):  # empty once slurmd's processes are gone; rmdir only
            for sub in sorted(d.glob("*/"), reverse=True):
                with contextlib.suppress(OSError):
                    sub.rmdir()
            with contextlib.suppress(OSError):
                d.rmdir()
        self._made_cgroups.clear()

    # -- queries used by tests
    # ---------------------------------------------------------------------------------
    def squeue(self) -> list[dict[str, str]]:
        """Every job the controller still knows (finished ones for MinJobAge), as dicts."""
        fields = ("JobID", "Partition", "Name", "State", "NodeList")
        out = subprocess.run(
            [self.cmd("squeue"), "-h", "--states=all", "-O", ",".join(f"{f}:|" for f in fields)],
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        jobs = []
        for line in out.splitlines():
            parts = [p.strip() for p in line.split("|")]
            jobs.append(dict(zip(fields, parts, strict=False)))
        return jobs

    def completed_jobs(self) -> list[dict[str, str]]:
        """Jobs recorded by jobcomp/filetxt (one ``Key=Value`` line per finished job)."""
        if not self.jobcomp.exists():
            return []
        jobs = []
        for line in self.jobcomp.read_text().splitlines():
            rec = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            jobs.append(rec)
        return jobs
