"""A search's journal, ``search/<class>.jsonl``: which answer reached the strategy at which of its delivery
points (``strategies.base.Session``), in that order. Written by ``pipeline.sweep.search`` as answers arrive,
replayed by a resumed search, read by the merge (how many proposals a search made) and the search trace."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from launchtune.kernels.atomic import write_text


class Journal:
    """``search/<class>.jsonl``: one line per answer, ``{"event": delivery point, "order": proposal}``, in
    the order answers reached the strategy; appended and flushed as they arrive, so a killed sweep loses at
    most the line being written (a torn last line is dropped on reading)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None

    def read(self) -> list[tuple[int, int]]:
        if not self.path.is_file():
            return []
        entries = []
        for line in self.path.read_text().splitlines():
            try:
                d = json.loads(line)
                entries.append((int(d["event"]), int(d["order"])))
            except (ValueError, KeyError, TypeError):
                break  # a torn last line: the answers after it are not known to have arrived
        return entries

    def rewrite(self, entries: Sequence[tuple[int, int]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_text(self.path, "".join(_line(e, o) for e, o in entries))

    def append(self, event: int, order: int) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a")  # noqa: SIM115  (held open for the search, closed by close())
        self._file.write(_line(event, order))
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _line(event: int, order: int) -> str:
    return json.dumps({"event": event, "order": order}) + "\n"
