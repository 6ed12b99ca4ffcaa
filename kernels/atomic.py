"""The one atomic file writer of the project (``kernels`` and ``pipeline`` both write through it).

A killed run must never leave half a file where a reader expects a whole one: every result file is written to
a temporary name in the same folder and renamed over the target (atomic on one file system). It lives in
``kernels`` because the runtime autotuner writes files too and ``kernels`` never imports ``pipeline``.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on failure it is removed.

    The temporary name carries host, process and a random part, so writers on several hosts sharing one
    folder (workers of a cluster) never collide.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        # what a message shows is the file asked for, not the temporary name (nor no name at all: a full
        # disk's ENOSPC from a write carries none)
        if exc.errno is not None and exc.filename in (None, str(tmp), tmp):
            raise OSError(exc.errno, exc.strerror or os.strerror(exc.errno), str(path)) from exc
        raise
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path | str, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
