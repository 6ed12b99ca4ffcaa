"""Library code reports through ``logging`` (never ``print``); the command line turns each message into one
plain line on stdout, as the commands always printed them."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

from launchtune.pipeline.logs import configure

REPO = Path(__file__).resolve().parents[2]
# the command-line front ends (and the example user program): what they print is their output
FRONT_ENDS = (
    "pipeline/cli.py",
    "pipeline/commands/",
    "kernels/cfd/cli.py",
    "kernels/tridiag/__main__.py",
    "kernels/examples/autotune_convolution.py",
)


def test_library_code_never_prints_nor_hands_print_on():
    found = []
    for pkg in ("pipeline", "kernels"):
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith(FRONT_ENDS):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Name) and node.id == "print":
                    found.append(f"{rel}:{node.lineno}")
    assert not found, f"print in library code (use logging.getLogger(__name__)): {found}"


def test_the_command_line_prints_each_message_as_one_plain_line(capsys):
    configure()
    configure()  # once more (main() runs again in one process): still one handler
    logger = logging.getLogger("launchtune.pipeline.sweep.run")
    logger.info("merged 12 rows from 3 shards into out/merged")
    logger.debug("not shown")
    logging.getLogger("launchtune.pipeline.cluster.local").warning("dashboard: http://127.0.0.1:8787/status")
    logging.getLogger("distributed.worker").info("not ours: Dask's own loggers keep their settings")
    assert capsys.readouterr().out == (
        "merged 12 rows from 3 shards into out/merged\ndashboard: http://127.0.0.1:8787/status\n"
    )


def test_progress_bars_follow_the_terminal_unless_told(monkeypatch):
    from launchtune.pipeline.logs import progress_bars, show_bars

    for tty in (True, False):
        monkeypatch.setattr("sys.stderr.isatty", lambda tty=tty: tty)
        assert show_bars() is tty
        with progress_bars(None):
            assert show_bars() is tty
        with progress_bars(True):
            assert show_bars()
        with progress_bars(False):
            assert not show_bars()
