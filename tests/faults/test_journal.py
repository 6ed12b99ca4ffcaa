"""A live search's journal as it may be found: bytes appended by something else (a UnicodeDecodeError made
every rerun fail before), a FIFO or a directory in its place (the rerun blocked on the open). Read up to the
first line that is not an answer, the rest rewritten away by the rerun; a non-regular file is one line."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.journal import Journal

GOOD = b'{"event": 0, "order": 0}\n{"event": 1, "order": 2}\n'


def test_bytes_appended_to_a_journal_are_a_torn_tail_not_a_traceback(tmp_path):
    path = tmp_path / "cpu.jsonl"
    path.write_bytes(GOOD + b"\xff\xfe garbage \x00\n" + b'{"event": 2, "order": 1}\n')
    journal = Journal(path)
    assert journal.read() == [(0, 0), (1, 2)] and journal.torn
    journal.rewrite(journal.read())  # what a resumed search does when the journal is torn
    journal.append(2, 1)
    journal.close()
    again = Journal(path)
    assert again.read() == [(0, 0), (1, 2), (2, 1)] and not again.torn


@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_a_journal_that_is_not_a_regular_file_is_one_line(tmp_path, kind):
    path = tmp_path / "cpu.jsonl"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    with pytest.raises(UserError, match="where a search journal file belongs") as info:
        Journal(path).read()
    assert "\n" not in str(info.value)
    with pytest.raises(UserError, match="cpu.jsonl: (cannot append|not a regular file)"):
        Journal(path).append(0, 0)  # never blocks on a FIFO without a reader


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=40))
def test_any_bytes_as_a_journal_read_as_answers_or_torn(head, tail):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cpu.jsonl"
        path.write_bytes(head + GOOD + tail)
        entries = Journal(path).read()
        assert all(isinstance(e, int) and isinstance(o, int) for e, o in entries)
        path.write_bytes(GOOD + tail)
        assert Journal(path).read()[:2] == [(0, 0), (1, 2)]
