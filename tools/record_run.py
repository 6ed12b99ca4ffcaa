"""Record a ``make test`` run for the README: ``python3 -m tools.record_run [-- COMMAND ...]``.

Runs COMMAND (default ``make test``) from the repository root, passing its output through, and writes
``data/ci/last_run.json``: the commit, the machine's cores, its 1-minute load average during the run (sampled
every 10 s: the lowest and highest), the wall time of the whole command (the install included on a fresh
clone), and pytest's own time and counts from its final summary line; the same record is appended to
``data/ci/runs.jsonl``. The README's sentence about the suite is generated from those files (``python -m
tools.readme``): the range of the suite's times over the recorded runs with their loads, and what the last run
did, at which commit. Record it on a clean clone::

    git clone REPO /tmp/fresh && cd /tmp/fresh && python3 -m tools.record_run
    cp /tmp/fresh/data/ci/last_run.json REPO/data/ci/
    tail -n 1 /tmp/fresh/data/ci/runs.jsonl >> REPO/data/ci/runs.jsonl
    cd REPO && .venv/bin/python -m tools.readme

Standard library only: it runs before ``.venv`` exists.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "ci" / "last_run.json"
# pytest's last line, e.g. "912 passed, 49 skipped, 2 warnings in 2682.01s (0:44:42)"
_SUMMARY = re.compile(r"^=*\s*(?P<counts>\d+ \w+(?:, \d+ \w+)*) in (?P<seconds>[\d.]+)s\b")
_COUNTED = ("passed", "failed", "skipped", "xfailed", "xpassed", "error", "errors")
LOAD_EVERY_S = 10.0


class LoadSampler(threading.Thread):
    """The 1-minute load average every ``every`` seconds while the command runs: a suite's time on a shared
    machine says little without the load it met."""

    def __init__(self, every: float = LOAD_EVERY_S):
        super().__init__(daemon=True)
        self.every, self.samples, self._done = every, [os.getloadavg()[0]], threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> list[float]:
        self._done.set()
        self.join()
        self.samples.append(os.getloadavg()[0])
        return [round(min(self.samples), 2), round(max(self.samples), 2)]


def parse_summary(output: str) -> tuple[dict[str, int], float]:
    """Counts by outcome and seconds from the last pytest summary line in ``output``."""
    for line in reversed(output.splitlines()):
        m = _SUMMARY.match(line.strip())
        if m:
            counts: dict[str, int] = {}
            for part in m.group("counts").split(", "):
                n, what = part.split(" ", 1)
                if what in _COUNTED:
                    key = "errors" if what == "error" else what
                    counts[key] = counts.get(key, 0) + int(n)
            return counts, float(m.group("seconds"))
    raise ValueError("no pytest summary line in the output")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tools.record_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help="where to write (default: data/ci/last_run.json)")
    ap.add_argument("command", nargs="*", default=["make", "test"], help="the command (default: make test)")
    args = ap.parse_args(argv)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
    dirty = bool(status.stdout)
    start = time.monotonic()
    load = LoadSampler()
    load.start()
    proc = subprocess.Popen(
        args.command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        sys.stdout.write(line)
        lines.append(line)
    rc = proc.wait()
    wall = time.monotonic() - start
    load_during = load.stop()
    try:
        counts, pytest_s = parse_summary("".join(lines))
    except ValueError as exc:
        print(f"error: {exc}; nothing recorded", file=sys.stderr)
        return rc or 1
    record = {
        "command": " ".join(args.command),
        "commit": commit,
        "dirty": dirty,
        "machine": f"{os.cpu_count()} cores",
        "load_1min_after": round(os.getloadavg()[0], 2),
        "load_1min_during": load_during,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rc": rc,
        "wall_s": round(wall, 1),
        "pytest_s": pytest_s,
        "counts": counts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(args.out)
    with open(args.out.with_name("runs.jsonl"), "a") as f:  # every recorded run: the README's time range
        f.write(json.dumps(record) + "\n")
    print(f"recorded {args.out}: {counts} in {wall / 60:.1f} min (rc {rc})", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
