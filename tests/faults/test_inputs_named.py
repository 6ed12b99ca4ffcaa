"""An input path that is not what it should be is named for what it is: a symlink loop (a RuntimeError
traceback in ``combine`` before), a FIFO or a device ("no such sweep folder", "Not a directory" before)."""

from __future__ import annotations

import os

import pytest

from launchtune.pipeline.errors import UserError
from launchtune.pipeline.learn.combine import combine, read_source
from launchtune.pipeline.store.datasets import load_datasets


@pytest.fixture
def odd(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    os.mkfifo(tmp_path / "fifo.json")
    return tmp_path


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("loop", "cannot use it as a {what} (Too many levels of symbolic links)"),
        ("fifo.json", "a FIFO where a {what} belongs"),
        ("/dev/null", "a character device where a {what} belongs"),
        ("absent", "no such {what}"),
    ],
)
def test_each_reader_names_what_the_input_is(odd, name, why):
    path = odd / name
    cases = [
        (
            lambda: combine(odd / "out", [path], log=lambda _: None),
            "sweep folder",
        ),
        (lambda: load_datasets(path), "file or directory (a dataset)"),
        (lambda: read_source(path), "sweep folder"),
    ]
    for call, what in cases:
        with pytest.raises(UserError) as info:
            call()
        assert str(info.value).startswith(f"{path}: " + why.format(what=what)), str(info.value)
    assert not (odd / "out").exists()
