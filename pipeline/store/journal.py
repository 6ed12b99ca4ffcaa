"""A search's journal, ``search/<class>.jsonl``: which answer reached the strategy at which of its delivery
points (``strategies.base.Session``), in that order. Written by ``pipeline.sweep.search`` as answers arrive,
replayed by a resumed search, read by the merge (how many proposals a search made) and the search trace."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launchtune.kernels.atomic import write_text
from launchtune.kernels.files import loads_json

from ..errors import UserError
from ..jsonio import read_regular_bytes


class Journal:
    """``search/<class>.jsonl``: one line per answer, ``{"event": delivery point, "order": proposal}``, in
    the order answers reached the strategy; appended and flushed as they arrive, so a killed sweep loses at
    most the line being written (a torn last line is dropped on reading)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self.torn = False  # the last read stopped at a line it could not read (a rerun rewrites the journal)
        self.torn_at = 0  # that line's number (from 1), where torn

    def read(self) -> list[tuple[int, int]]:
        """The answers up to the first line that is not one (torn, or bytes appended by something else:
        the answers after it are not known to have arrived). A FIFO, a device or a directory in its place
        is one line (``pipeline.jsonio``), never a hang."""
        data = read_regular_bytes(self.path, "search journal", missing_ok=True)
        self.torn, self.torn_at = False, 0
        if data is None:
            return []
        entries: list[tuple[int, int]] = []
        seen: set[int] = set()
        lines = data.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        for number, line in enumerate(lines, 1):
            try:
                d = loads_json(line.decode("utf-8"))  # a key twice: not an answer, not the last one
                entry = (int(d["event"]), int(d["order"]))
                if entry[1] in seen:  # a proposal is answered once: a second answer is not one we wrote
                    raise ValueError(f"proposal {entry[1]} answered twice")
            except (ValueError, KeyError, TypeError, IndexError, OverflowError, RecursionError):
                self.torn, self.torn_at = True, number
                break
            seen.add(entry[1])
            entries.append(entry)
        return entries

    def rewrite(self, entries: Sequence[tuple[int, int]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.path, "".join(_line(e, o) for e, o in entries))

    def append(self, event: int, order: int) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # without blocking: a FIFO put in its place since the read is refused (ENXIO, or not regular)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
            try:
                fd = os.open(self.path, flags, 0o644)
            except OSError as exc:
                raise UserError(
                    f"{self.path}: cannot append to this search journal ({exc.strerror})"
                ) from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise UserError(
                    f"{self.path}: not a regular file where a search journal belongs; move it away"
                )
            self._file = os.fdopen(fd, "a")  # held open for the search, closed by close()
        self._file.write(_line(event, order))
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _line(event: int, order: int) -> str:
    return json.dumps({"event": event, "order": order}) + "\n"
