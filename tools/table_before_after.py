"""The tuning tables written, and the picks read from them, by two versions of the code on the same data.

    python -m tools.table_before_after [--old REV] [--out DIR] [SWEEP_DIR ...]

For each sweep folder (default: the committed convolution and fused CFD sweeps on the H100), a copy gets
its report rebuilt by this checkout and one by ``REV`` (a ``git worktree`` of it, removed afterwards), and
the two ``tuning_table.json`` are compared byte for byte but for their ``created`` line. Then each version
reads its own table back: per entry, the runtime tuner's seeds (``table_seeds`` at the entry's class and
size, for the entry's default's parameters: the candidates ``autotune`` and the CFD solver scan, in order)
and ``pick_for_device`` (the best per class, what the C header writes). Exit 0 where everything is equal.

A sweep measured live on a GPU (``launchtune sweep cluster_configs/sweeps/kernel_convolution.yaml``, the
fused CFD spec) can be given as SWEEP_DIR: the comparison needs the measured folder, not the GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from launchtune.kernels.tuning_table import in_folder

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SWEEPS = ("data/convolution/h100/sweep", "data/cfd/h100/sweep_fused")
OLD = "79a0f2e"  # main before the tuning table had one owner (kernels/tuning_table.py)

# Run by each version on its own table: the seeds and the pick per entry, as JSON.
READ_BACK = """
import json, sys
try:
    from launchtune.kernels.tuning_table import table_seeds
except ImportError:  # before kernels/tuning_table.py
    from launchtune.kernels.autotune.table import table_seeds
from launchtune.kernels.kernel.pick import pick_for_device
path = sys.argv[1]
out = []
for entry in json.load(open(path))["entries"]:
    cls, size, default = entry["gpu_class"], entry["size"], entry["default"]
    seeds = table_seeds(path, cls, size, default)
    pick = pick_for_device(path, gpu_class=cls)
    out.append({"gpu_class": cls, "seeds": seeds.configs, "source": seeds.source, "size": seeds.size,
                "pick": pick.config, "tuned": pick.tuned, "ms": pick.ms, "objective": pick.objective})
print(json.dumps(out))
"""


def _run(checkout: Path, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, *args], cwd=checkout, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"{checkout}: {' '.join(args[:4])} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def _table_lines(folder: Path) -> list[str]:
    return [line for line in in_folder(folder).read_text().splitlines() if '"created"' not in line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="*", type=Path, default=[REPO / d for d in DEFAULT_SWEEPS])
    parser.add_argument("--old", default=OLD, help=f"the version to compare against (default {OLD})")
    parser.add_argument("--out", type=Path, help="where the rebuilt folders go (default: a temporary folder)")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="table_before_after_"))
    old = out / "old_checkout"
    subprocess.run(["git", "worktree", "add", "--detach", str(old), args.old], cwd=REPO, check=True)
    same = True
    try:
        for sweep in args.sweeps:
            tables: dict[str, Any] = {}
            for name, checkout in (("old", old), ("new", REPO)):
                copy = out / f"{name}_{'_'.join(sweep.resolve().parts[-3:])}"
                shutil.copytree(sweep, copy, dirs_exist_ok=True)
                _run(checkout, "-m", "launchtune", "report", str(copy))
                tables[name] = (copy, _table_lines(copy))
                table = str(in_folder(copy))
                tables[name + "_read"] = json.loads(_run(checkout, "-c", READ_BACK, table))
            written = tables["old"][1] == tables["new"][1]
            read = tables["old_read"] == tables["new_read"]
            same &= written and read
            seeds = sum(len(e["seeds"]) for e in tables["new_read"])
            lines, classes = len(tables["new"][1]), len(tables["new_read"])
            print(
                f"{sweep}: tables {'equal' if written else 'DIFFER'} ({lines} lines, created aside); "
                f"seeds and picks {'equal' if read else 'DIFFER'} ({classes} classes, {seeds} seeds in order)"
            )
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=REPO, check=False)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
