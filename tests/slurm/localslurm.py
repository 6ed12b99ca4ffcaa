"""A real single-node SLURM on localhost, for integration tests (Debian's slurm-wlm and munge).

Everything it writes lives in one private folder (config, state, spool, logs, pid files) and it listens on
free ports, so it never touches /etc/slurm or a SLURM that is already running; client commands find it
through the ``SLURM_CONF`` variable in :attr:`LocalSlurm.env`. Facts that make it work in a container as
root (slurm-wlm 22.05, Debian 12): /run/munge must belong to ``munge`` before munged starts as that user; no
cgroups (``proctrack/linuxproc``, ``task/none``, and no cgroup.conf: 22.05 has no ``CgroupPlugin=disabled``);
a fake GPU GRES backed by one plain file per GPU (slurmd refuses the same file twice), so SLURM schedules
``--gres=gpu:1`` as on a GPU cluster.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

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

    def __init__(self, root: Path, partitions: Sequence[str], cpus: int | None = None, gpus: int = 4):
        self.root = Path(root)
        self.partitions = list(partitions)
        self.cpus = cpus or os.cpu_count() or 1
        self.gpus = gpus
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
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def _write_config(self) -> None:
        for d in ("state", "spool", "log"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        ctld_port, slurmd_port = _free_port(), _free_port()
        mem_mb = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.9)
        gres = f"gpu:{self.gpus}" if self.gpus else ""
        lines = [
            "ClusterName=launchtune-test",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
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
        # slurmd wants one distinct file per GPU; plain files stand in for /dev/nvidiaN (nothing opens them).
        fakes = []
        for i in range(self.gpus):
            fake = self.root / f"fake-nvidia{i}"
            fake.touch()
            fakes.append(f"NodeName={self.host} Name=gpu File={fake}\n")
        (self.root / "gres.conf").write_text("".join(fakes))

    def _start_munge(self) -> None:
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
        subprocess.run(["slurmctld", "-f", str(self.conf)], env=env, check=True)
        self._procs.append(self._read_pid("slurmctld.pid"))
        subprocess.run(["slurmd", "-f", str(self.conf)], env=env, check=True)
        self._procs.append(self._read_pid("slurmd.pid"))
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True)
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
            ["scancel", "--full", "--partition", ",".join(self.partitions)], env=self.env, capture_output=True
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

    # -- queries used by tests
    # ---------------------------------------------------------------------------------
    def squeue(self) -> list[dict[str, str]]:
        """Every job the controller still knows (finished ones for MinJobAge), as dicts."""
        fields = ("JobID", "Partition", "Name", "State", "NodeList")
        out = subprocess.run(
            ["squeue", "-h", "--states=all", "-O", ",".join(f"{f}:|" for f in fields)],
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
