"""Per-sweep TLS credentials, so nobody else on a shared cluster can talk to the sweep's Dask scheduler.

A Dask scheduler runs whatever code a connected client sends it. On a login node its port is reachable by
every user of the cluster, so a SLURM sweep speaks TLS with mutual authentication: scheduler, workers and
client all present a certificate signed by a key made for this sweep alone, and a peer without it is refused
during the handshake. ``distributed.Security.temporary()`` makes the key pair (needs ``cryptography``); the
worker jobs run on other nodes, so the PEM files are written into the sweep's private folder on the shared
file system, readable by the user only (folder 0700, files 0600), and removed when the sweep ends, whatever
way it ends.

The local cluster (:func:`local_security`) authenticates the same way: 127.0.0.1 keeps other machines out, not
other users of this one. Its workers are child processes, so the key pair stays in memory and reaches them
through the pipe that starts them; nothing is written into the sweep folder.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a cluster is made: one device in-process never loads Dask
    from distributed.security import Security

CREDENTIALS_DIRNAME = "credentials"


@dataclass(frozen=True)
class Credentials:
    """Where this sweep's credentials live and the Security object that points at them."""

    directory: Path
    cert_file: Path
    key_file: Path
    security: Security

    @property
    def files(self) -> list[Path]:
        return [self.cert_file, self.key_file]


def security_from_files(cert_file: str | Path, key_file: str | Path) -> Security:
    """Mutual TLS for every role from one self-signed pair: the certificate is also the only trusted CA.

    File paths (not PEM text) go into the Security object, so dask-jobqueue passes paths, never key
    material, on the workers' command lines (visible to other users through ``scontrol show job``).
    """
    cert, key = str(cert_file), str(key_file)
    from distributed.security import Security

    return Security(
        require_encryption=True,
        tls_ca_file=cert,
        tls_client_cert=cert,
        tls_client_key=key,
        tls_scheduler_cert=cert,
        tls_scheduler_key=key,
        tls_worker_cert=cert,
        tls_worker_key=key,
    )


def local_security() -> Security:
    """Mutual TLS for a local cluster, from a key pair made now and held in memory only.

    ``Security.temporary()`` is the very key pair :func:`write_credentials` writes out for SLURM, as PEM text:
    one self-signed certificate is the only trusted CA of every role, and ``require_encryption`` refuses any
    plain-TCP peer. (``distributed`` copies in-memory PEMs into a ``tempfile.TemporaryDirectory``, which is
    0700, for the moment ``ssl`` loads them; they are gone again before any connection is made.)
    """
    from distributed.security import Security

    return Security.temporary()


def _write_private(path: Path, text: str) -> None:
    # O_EXCL + mode at creation: never readable by others, not even for an instant (no chmod race).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)  # in case a umask made it stricter than the worker can read; never looser


def write_credentials(workdir: Path) -> Credentials:
    """Make a fresh key pair for one sweep under ``workdir/credentials`` (folder 0700, files 0600)."""
    directory = Path(workdir) / CREDENTIALS_DIRNAME
    directory.parent.mkdir(parents=True, exist_ok=True)
    if directory.exists():  # left by a sweep that was killed -9: its key is stale, never reuse it
        shutil.rmtree(directory)
    directory.mkdir(mode=0o700)
    os.chmod(directory, 0o700)
    from distributed.security import Security

    temporary = Security.temporary()
    cert_file, key_file = directory / "sweep-cert.pem", directory / "sweep-key.pem"
    _write_private(cert_file, temporary.tls_scheduler_cert)
    _write_private(key_file, temporary.tls_scheduler_key)
    return Credentials(directory, cert_file, key_file, security_from_files(cert_file, key_file))


def remove_credentials(credentials: Credentials) -> None:
    shutil.rmtree(credentials.directory, ignore_errors=True)


@contextmanager
def sweep_credentials(workdir: Path) -> Iterator[Credentials]:
    """Credentials that exist exactly as long as the ``with`` block (removed on error and Ctrl-C too)."""
    credentials = write_credentials(workdir)
    try:
        yield credentials
    finally:
        remove_credentials(credentials)


def is_private(path: Path) -> bool:
    """True when neither group nor others have any permission on ``path``."""
    return stat.S_IMODE(Path(path).stat().st_mode) & 0o077 == 0
