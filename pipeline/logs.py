"""Where the pipeline's messages go. Library modules report through ``logging.getLogger(__name__)`` (never
``print``); the command line (``pipeline.cli``) calls :func:`configure`, which writes each message of the
``pipeline`` loggers as it is, one line per message, on standard output, as the commands always printed
them: no level or logger name in front, flushed at once (a batch job's log shows each line as it happens),
and above any progress bar on a terminal (``tqdm.write``). A program that imports the library configures
logging as it likes; a notebook sees the warnings only, as ``logging`` does by default.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from tqdm import tqdm

from .errors import UserError

ROOT = "launchtune"
LEVEL_ENV = "LAUNCHTUNE_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class _Lines(logging.Handler):
    """Each record as one line on the standard output of the moment (``sys.stdout`` is looked up at each
    message, so a test that captures it sees them)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stdout)
            sys.stdout.flush()
        except Exception:
            self.handleError(record)


def level_from(verbose: int = 0, quiet: int = 0, environ: dict[str, str] | None = None) -> int:
    """The command line's level: ``-v`` (DEBUG) or ``-q`` (WARNING; ``-qq`` ERROR) where given, else
    ``$LAUNCHTUNE_LOG_LEVEL`` (a level name, any case), else INFO. A bad variable is one line, exit 2."""
    if verbose or quiet:
        return max(logging.DEBUG, min(logging.CRITICAL, logging.INFO + 10 * (quiet - verbose)))
    raw = (os.environ if environ is None else environ).get(LEVEL_ENV, "").strip()
    if not raw:
        return logging.INFO
    if raw.upper() not in LEVELS:
        raise UserError(f"${LEVEL_ENV}: expected one of {', '.join(LEVELS)}, got {raw[:40]!r}")
    return int(getattr(logging, raw.upper()))


def configure(level: int = logging.INFO) -> logging.Logger:
    """Send the ``pipeline`` loggers' messages to standard output as plain lines (one handler, however often
    it is called). They still reach the root logger (which has no handler of its own in a command)."""
    logger = logging.getLogger(ROOT)
    for handler in [h for h in logger.handlers if isinstance(h, _Lines)]:
        logger.removeHandler(handler)
    handler = _Lines()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)
    return logger


_BARS: ContextVar[bool | None] = ContextVar("launchtune_progress_bars", default=None)


@contextmanager
def progress_bars(on: bool | None = True) -> Iterator[None]:
    """Progress bars (``tqdm.auto``: a widget in a notebook) on or off inside, wherever standard error goes
    (None: on a terminal only). The Python API turns them on in a notebook, where standard error is never a
    terminal."""
    token = _BARS.set(on)
    try:
        yield
    finally:
        _BARS.reset(token)


def show_bars() -> bool:
    """Whether a long loop draws a bar: as :func:`progress_bars` says, else on a terminal. Elsewhere (a log
    file, a batch job) it writes whole lines (``launchtune.kernels.progress``)."""
    on = _BARS.get()
    return sys.stderr.isatty() if on is None else on
