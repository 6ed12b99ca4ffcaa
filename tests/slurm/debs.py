"""SLURM and munge from Debian .deb files unpacked into a private folder: no registry, nothing under /.

For a host where ``apt-get install`` is impossible (the lent GPU hosts reach no registry) but root and a
Linux with glibc >= 2.34 are there:

    python -m tests.slurm.debs download .slurm-debs   # where apt-get works: the .debs of PACKAGES + LIBRARIES
    python -m tests.slurm.debs unpack .slurm-debs /tmp/slurm-prefix   # on the target: dpkg -x, ldd, wrappers

``unpack`` runs ``dpkg -x`` on every .deb into ``PREFIX/root`` (never ``/``), then asks ``ldd`` what the
daemons, the clients and the plugins still miss on *this* system and links only those libraries into
``PREFIX/lib-missing`` from the unpacked ones; a system library is never shadowed. ``PREFIX/bin`` gets one
wrapper per command (``sbatch``, ``squeue``, ..., ``slurmctld``, ``munged``) that sets ``LD_LIBRARY_PATH`` to
SLURM's private library folder (``libslurmfull.so``, the plugins) and ``lib-missing``, then runs the binary,
so ``PATH=PREFIX/bin:$PATH`` is all a caller (or dask-jobqueue, which calls ``sbatch`` by name) needs. The
compiled-in paths are overridden where SLURM reads them: ``PluginDir`` in slurm.conf, ``slurmd -d`` for
``slurmstepd``, ``SLURM_CONF`` for the clients (see :mod:`tests.slurm.localslurm`).

Why Debian 12's packages (slurm-wlm 22.05) also on the Ubuntu 24.04 GPU image: they are what ``apt-get
download`` reaches from the machine that prepares the run, glibc is backwards compatible (built for 2.36,
run on 2.39), and the library closure below travels with them; ``ldd`` then decides what is used.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "slurm-wlm-basic-plugins", "munge", "libmunge2")
# Their library closure (apt-cache depends --recurse, Depends only), without what every glibc system that runs
# Python has (libc6, libgcc-s1, libstdc++6, libcrypt1). Carried whole; ldd picks what a host lacks.
LIBRARIES = (
    "libacl1",
    "libaudit1",
    "libbz2-1.0",
    "libcap-ng0",
    "libcap2",
    "libdbus-1-3",
    "libgcrypt20",
    "libgpg-error0",
    "libhwloc15",
    "libjson-c5",
    "liblua5.1-0",
    "liblz4-1",
    "liblzma5",
    "libnuma1",
    "libpam0g",
    "libpcre2-8-0",
    "libreadline8",
    "libselinux1",
    "libsystemd0",
    "libtinfo6",
    "libudev1",
    "libyaml-0-2",
    "libzstd1",
    "zlib1g",
)
# command -> path inside the unpacked root. Debian installs the daemons as *-wlm behind update-alternatives;
# unpack() links the plain names to them, because SLURM tells its daemons apart by the program name
# (a slurmctld started as "slurmctld-wlm" drops every node's Gres= from slurm.conf, seen with 22.05.8)
WLM = ("slurmctld", "slurmd", "slurmstepd")
COMMANDS = {
    "slurmctld": "usr/sbin/slurmctld",
    "slurmd": "usr/sbin/slurmd",
    "slurmstepd": "usr/sbin/slurmstepd",
    "munged": "usr/sbin/munged",
    "mungekey": "usr/sbin/mungekey",
    **{
        c: f"usr/bin/{c}"
        for c in ("sbatch", "squeue", "scancel", "sinfo", "scontrol", "srun", "sacct", "munge", "unmunge")
    },
}
SLURM_LIBDIR = "usr/lib/x86_64-linux-gnu/slurm-wlm"
# plugins a LocalSlurm's slurm.conf selects (or SLURM loads by default): a library one of them misses is an
# error; one that only some other plugin misses is reported and left alone
NEEDED_PLUGINS = (
    "auth_munge",
    "cred_munge",
    "cgroup_v1",  # slurmd loads the cgroup plugin for the host's cgroup version even with task/none
    "cgroup_v2",
    "select_cons_tres",
    "gres_gpu",
    "gpu_generic",
    "proctrack_linuxproc",
    "task_none",
    "sched_backfill",
    "jobcomp_filetxt",
    "accounting_storage_none",
    "jobacct_gather_none",
    "acct_gather_energy_none",
    "acct_gather_profile_none",
    "acct_gather_interconnect_none",
    "acct_gather_filesystem_none",
    "mpi_none",
    "topology_none",
    "switch_none",
    "prep_script",
    "cli_filter_none",
    "job_container_none",
    "ext_sensors_none",
    "node_features_none",
    "preempt_none",
    "priority_basic",
    "route_default",
    "site_factor_none",
    "hash_k12",
    "serializer_json",
)
_NOT_FOUND = re.compile(r"^\s*(\S+) => not found", re.M)


class DebError(RuntimeError):
    """The .deb folder or the unpacked prefix cannot give a working SLURM (one line saying why)."""


def download(dest: Path, log=print) -> list[Path]:
    """``apt-get download`` PACKAGES and LIBRARIES into ``dest`` (the machine's own Debian/Ubuntu release)."""
    dest.mkdir(parents=True, exist_ok=True)
    names = list(PACKAGES + LIBRARIES)
    cmd = ["apt-get", "download", "-q", *names]
    if subprocess.run(cmd, cwd=dest, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, check=True)
        subprocess.run(cmd, cwd=dest, capture_output=True, check=True)
    debs = sorted(dest.glob("*.deb"))
    log(f"{len(debs)} .deb files in {dest} ({sum(p.stat().st_size for p in debs) / 2**20:.1f} MiB)")
    return debs


@dataclass(frozen=True)
class Prefix:
    """An unpacked SLURM: where its commands, plugins and libraries are, and the environment to run them."""

    path: Path

    @property
    def root(self) -> Path:
        return self.path / "root"

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def plugin_dir(self) -> Path:
        return self.root / SLURM_LIBDIR

    @property
    def library_path(self) -> list[Path]:
        # never the unpacked library folders themselves: only what this host lacks (lib-missing) may be found
        return [self.plugin_dir, self.path / "lib-missing"]

    def command(self, name: str) -> Path:
        """The wrapper that runs ``name`` (``slurmstepd``: the binary; slurmd execs it with its env)."""
        if name == "slurmstepd":
            return self.root / COMMANDS[name]
        return self.bin / name

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default os.environ) with PATH led by the wrappers and the libraries the daemons need."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.bin}:{env.get('PATH', '/usr/bin:/bin')}"
        env["LD_LIBRARY_PATH"] = _join_path([*map(str, self.library_path), env.get("LD_LIBRARY_PATH", "")])
        return env

    def report(self) -> dict:
        path = self.path / "unpack.json"
        return json.loads(path.read_text()) if path.exists() else {}


def _join_path(parts: list[str]) -> str:
    return ":".join(p for p in parts if p)


def _missing(paths: list[Path], library_path: list[Path]) -> dict[str, list[str]]:
    """soname -> the files that need it and ldd cannot find (with ``library_path`` searched first)."""
    env = dict(os.environ, LD_LIBRARY_PATH=_join_path([*map(str, library_path)]))
    missing: dict[str, list[str]] = {}
    for p in paths:
        out = subprocess.run(["ldd", str(p)], env=env, capture_output=True, text=True).stdout
        for soname in _NOT_FOUND.findall(out):
            missing.setdefault(soname, []).append(p.name)
    return missing


def unpack(debs: Path, prefix: Path, log=print) -> Prefix:
    """``dpkg -x`` every .deb of ``debs`` into ``prefix/root``, link the libraries this host lacks, write the
    command wrappers; an error names a command or needed plugin whose library is neither here nor carried."""
    files = sorted(Path(debs).glob("*.deb"))
    have = {f.name.split("_", 1)[0] for f in files}
    lacking = [p for p in PACKAGES if p not in have]
    if lacking:
        raise DebError(
            f"{debs}: no .deb for {', '.join(lacking)} (make them with: python -m tests.slurm.debs "
            f"download {debs})"
        )
    if not shutil.which("dpkg") and not shutil.which("dpkg-deb"):
        raise DebError("neither dpkg nor dpkg-deb is on this host: cannot unpack .deb files")
    pre = Prefix(Path(prefix).resolve())
    shutil.rmtree(pre.path, ignore_errors=True)
    pre.root.mkdir(parents=True)
    tool = ["dpkg", "-x"] if shutil.which("dpkg") else ["dpkg-deb", "-x"]
    for f in files:
        subprocess.run([*tool, str(f), str(pre.root)], check=True)
    for name in WLM:  # what update-alternatives would have done
        (pre.root / "usr/sbin" / name).symlink_to(f"{name}-wlm")
    missing_dir = pre.path / "lib-missing"
    missing_dir.mkdir()
    carried: dict[str, Path] = {}
    for d in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"):
        for so in (pre.root / d).glob("*.so*"):
            carried.setdefault(so.name, so)
    binaries = [pre.root / p for p in COMMANDS.values()]
    needed = [pre.plugin_dir / f"{p}.so" for p in NEEDED_PLUGINS if (pre.plugin_dir / f"{p}.so").exists()]
    others = [p for p in pre.plugin_dir.glob("*.so") if p not in needed]
    search = pre.library_path
    linked: list[str] = []
    # a carried library may itself need one the host lacks: repeat until nothing new is linked
    for _ in range(10):
        gaps = _missing(binaries + needed + [missing_dir / s for s in linked], search)
        new = [s for s in gaps if s in carried and s not in linked]
        for soname in new:
            (missing_dir / soname).symlink_to(carried[soname].resolve())
            linked.append(soname)
        if not new:
            break
    unresolved = {s: who for s, who in gaps.items() if s not in carried}
    if unresolved:
        soname, who = next(iter(unresolved.items()))
        raise DebError(
            f"{soname} (needed by {', '.join(sorted(set(who)))}) is neither on this host nor among "
            f"the .debs of {debs}: add its package to LIBRARIES"
        )
    optional = {s: sorted(set(w)) for s, w in _missing(others, search).items() if s not in carried}
    pre.bin.mkdir()
    lib_path = _join_path([str(p) for p in pre.library_path])
    for name, rel in COMMANDS.items():
        if name == "slurmstepd":
            continue
        wrapper = pre.bin / name
        # exec keeps the pid (pid files, signals); the library path is prepended, the caller's kept behind it
        wrapper.write_text(
            "#!/bin/sh\n"
            f'LD_LIBRARY_PATH="{lib_path}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"; export LD_LIBRARY_PATH\n'
            f'exec "{pre.root / rel}" "$@"\n'
        )
        wrapper.chmod(0o755)
    # slurmd -V needs no slurm.conf (the clients' --version does); it loads libslurmfull and node libraries
    version = subprocess.run([str(pre.bin / "slurmd"), "-V"], capture_output=True, text=True)
    if version.returncode != 0:
        raise DebError(
            f"slurmd from {pre.root} does not run: {(version.stderr or version.stdout).strip()[:300]}"
        )
    report = {
        "debs": [f.name for f in files],
        "slurm_version": version.stdout.strip(),
        "libraries_linked_from_debs": sorted(linked),
        "plugins_left_unusable": optional,
    }
    (pre.path / "unpack.json").write_text(json.dumps(report, indent=1))
    log(
        f"unpacked {len(files)} .debs into {pre.root}: {report['slurm_version']}; libraries the host lacked: "
        f"{', '.join(linked) or 'none'}"
    )
    return pre


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("download", help="apt-get download the .debs into DIR")
    d.add_argument("dir", type=Path)
    u = sub.add_parser("unpack", help="dpkg -x the .debs of DIR into PREFIX and write the wrappers")
    u.add_argument("dir", type=Path)
    u.add_argument("prefix", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "download":
            download(args.dir)
        else:
            pre = unpack(args.dir, args.prefix)
            print(f"export PATH={pre.bin}:$PATH")
    except (DebError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
