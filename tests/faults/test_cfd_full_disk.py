"""A full disk while ``python -m launchtune.kernels.cfd run`` writes its results (issue 54) is one line naming
the file asked for, exit 2, nothing half-written; it was a traceback naming no file."""

from __future__ import annotations

import errno
from pathlib import Path

from launchtune.kernels.cfd.cli import main


def test_a_full_disk_during_cfd_run_is_one_line_naming_the_file(tmp_path, monkeypatch, capsys):
    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write on a full disk: no file named

    monkeypatch.setattr(Path, "write_text", full)
    out = tmp_path / "inlet"
    argv = ["run", "--case", "inlet", "--size", "52x16", "--steps", "5", "--backend", "numpy", "--no-plot"]
    code = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("step ")]  # progress
    assert code == 2 and len(lines) == 1, err
    why = "No space left on device; nothing of this run was written"
    assert lines[0] == f"error: {out / 'summary.json'}: {why}"
    assert not out.exists() or list(out.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir()] in ([], ["inlet"])  # no temporary folder left beside it
