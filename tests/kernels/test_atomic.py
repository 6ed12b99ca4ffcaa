"""A failed atomic write names the file asked for: not the temporary name beside it, and not nothing (a full
disk's ENOSPC from a write carries no name), so the one line the user sees says which file."""

from __future__ import annotations

import errno

import pytest

from launchtune.kernels.atomic import atomic_path
from launchtune.pipeline.errors import path_error_line


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (lambda tmp: OSError(errno.ENOSPC, "No space left on device"), OSError),
        (lambda tmp: PermissionError(errno.EACCES, "Permission denied", str(tmp)), PermissionError),
    ],
)
def test_a_failed_write_names_the_target_not_the_temporary_file(tmp_path, raised, kind):
    target = tmp_path / "x.json"
    with pytest.raises(kind) as info, atomic_path(target) as tmp:
        raise raised(tmp)
    line = path_error_line(info.value)
    assert line is not None and line.startswith(f"{target}: ") and ".tmp" not in line
    assert not list(tmp_path.iterdir())  # no temporary file left


def test_an_error_naming_another_file_keeps_its_name(tmp_path):
    with pytest.raises(FileNotFoundError) as info, atomic_path(tmp_path / "x.json"):
        open(tmp_path / "missing/other")
    assert info.value.filename == str(tmp_path / "missing/other")
