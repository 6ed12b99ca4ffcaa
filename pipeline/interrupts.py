"""Ctrl-C and SIGTERM end a command at once, cleanly, with one line (issue 14).

``signals_interrupt`` makes SIGINT and SIGTERM raise :class:`Interrupted` in the main thread, so the ``with``
blocks of the command unwind: the cluster is closed, the sweep folder's lock released, a temporary file that
was being written removed (every result file is written atomically, ``kernels.atomic``). The CLI turns it
into one line and exit 130, for Ctrl-C and SIGTERM alike.

Three things would otherwise swallow or garble it:

- scikit-learn's MLP catches ``KeyboardInterrupt`` inside ``fit`` and returns the half-trained model. Where a
  fit runs in this process, :func:`check` after it raises again (``pipeline.learn.parallel`` calls it after
  each fit), so no half-trained model is saved or used.
- Ctrl-C in a terminal reaches every process of the foreground group, and so does the SIGHUP of a closed
  terminal: the Dask workers and the training pool would each print their own traceback (a worker killed
  while its Nanny started it: "Task exception was never retrieved ... Nanny failed to start worker
  process"). They ignore both (:data:`TERMINAL_SIGNALS`; :func:`ignore_sigint`, installed by
  ``pipeline.cluster.worker_signals`` and the pool's initializer; the pool's processes from their start,
  :func:`children_ignore_sigint`; the local cluster's workers from theirs, :func:`spawned_ignore_sigint`);
  the command that owns them stops them.
- an interrupted wait inside distributed's ``sync`` can fail on the event loop as it unwinds, and tornado logs
  that with a traceback: the loggers of ``QUIET_AFTER_SIGNAL`` are quiet from the first signal to the block's
  end, and so are Python warnings (joblib warns of the tasks an interrupted fit left unused).
- a signal whose handler runs inside a finalizer (a Dask future's ``__del__``, a gc callback) raises where
  Python ignores the exception and prints "Exception ignored in ..." with a traceback; the command would go
  on. Inside the block, :func:`_resend_lost` takes such an ``Interrupted`` and sends the signal again, so it
  is raised at the main thread's next step, outside the finalizer.
- SIGHUP (a closed terminal) reaches the whole process group, and the resource trackers of multiprocessing
  and of joblib's pool ignore only SIGINT and SIGTERM: killed, each was started again at the next unregister
  and printed a ``KeyError`` traceback per semaphore it had never seen, after the command's one line.
  :func:`trackers_ignore_sighup` starts them first, with SIGHUP blocked (a mask survives ``exec``, and
  their ``main`` unblocks SIGINT and SIGTERM only); they end, as always, when this process closes their pipe.
"""

from __future__ import annotations

import _thread
import logging
import os
import shlex
import signal
import sys
import threading
import warnings
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

# SIGHUP too: a closed terminal or ssh session ends the sweep as Ctrl-C does, with its one line
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# what a terminal sends its whole foreground group (Ctrl-C, hanging up): helper processes ignore these and
# leave them to the command that owns them
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGHUP)

_received: list[int] = []  # the signals this process got inside signals_interrupt, in order
_active: list[bool] = []  # one entry per signals_interrupt block open


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived. A ``KeyboardInterrupt``, so code that cleans up after Ctrl-C (joblib kills
    its pool, Dask cancels) does the same here."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# Loggers whose errors after a signal are the teardown's noise, not news: an interrupted wait inside
# distributed's ``sync`` can leave its cancel callback to fail on the event loop (distributed 2026.8:
# ``NameError: ... free variable 'future'``, seen once in CI), which tornado logs with a traceback, and the
# command's one line would be eleven. Quieted from the first signal to the end of the block. And asyncio's: a
# worker that a group's SIGTERM killed while its Nanny started it leaves a task whose failure nobody awaits
# once the cluster closes ("Task exception was never retrieved ... Nanny failed to start worker process",
# seventeen lines, seen after a SIGHUP to the group before the workers ignored it).
QUIET_AFTER_SIGNAL = ("tornado.application", "asyncio")
_levels: dict[str, int] = {}  # their levels before, while quieted
_warnings: list[warnings.catch_warnings] = []  # the warning filters to restore, while quieted (one at most)


def _quiet() -> None:
    for name in QUIET_AFTER_SIGNAL:
        log = logging.getLogger(name)
        _levels.setdefault(name, log.level)
        log.setLevel(logging.CRITICAL + 1)
    if not _warnings:
        _warnings.append(warnings.catch_warnings())
        _warnings[0].__enter__()
        warnings.simplefilter("ignore")


def _unquiet() -> None:
    for name, level in _levels.items():
        logging.getLogger(name).setLevel(level)
    _levels.clear()
    if _warnings:
        _warnings.pop().__exit__(None, None, None)


def _resend_lost(unraisable) -> None:
    """``sys.unraisablehook`` inside :func:`signals_interrupt`: an ``Interrupted`` raised inside a finalizer
    is not lost but sent again, to be raised where the main thread can unwind; anything else is reported as
    Python reports it. A bare thread marks the signal pending for the main thread: sent from the main thread
    itself (``signal.raise_signal``, ``_thread.interrupt_main``), or while it waits for a ``threading.Thread``
    to start, the handler runs at once, inside this hook, and is lost again."""
    if isinstance(unraisable.exc_value, Interrupted):
        _thread.start_new_thread(_thread.interrupt_main, (signal.Signals(unraisable.exc_value.signum),))
    else:
        sys.__unraisablehook__(unraisable)


def _raise(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    _quiet()
    raise Interrupted(signum)


def received() -> int | None:
    """The first signal this process got under :func:`signals_interrupt`, or None."""
    return _received[0] if _received else None


def check() -> None:
    """Raise :class:`Interrupted` again where a signal arrived and was swallowed (scikit-learn's MLP); only
    inside :func:`signals_interrupt`, so a signal another command got (tests run many in one process) is not
    raised again."""
    if _active and _received:
        raise Interrupted(_received[0])


@contextmanager
def signals_interrupt(signals: Collection[int] = SIGNALS) -> Iterator[None]:
    """``signals`` (SIGINT and SIGTERM) raise :class:`Interrupted` inside the block (main thread only, else a
    no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()  # a fresh command (the tests run several in one process)
    old = {s: signal.signal(s, _raise) for s in signals}
    old_hook, sys.unraisablehook = sys.unraisablehook, _resend_lost
    _active.append(True)
    try:
        yield
    finally:
        _active.pop()
        sys.unraisablehook = old_hook
        for s, handler in old.items():
            signal.signal(s, handler)
        _received.clear()
        _unquiet()


@contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT and SIGTERM inside the block are held until it ends, then raised: for cleanup that must not stop
    half-way (closing a cluster). The block must be bounded in time (its own timeouts)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        _received.append(signum)
        held.append(signum)
        _quiet()

    old = {s: signal.signal(s, hold) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if held:
        raise Interrupted(held[0])


def exit_on_signal() -> None:
    """From now to the process's end, a signal of :data:`SIGNALS` ends it at once with one line and exit 130.

    For the console entry point, after the command returned: the process still closes Dask's threads and runs
    its exit handlers for a second or two, where Python's default would end it by SIGTERM (exit -15, no line)
    or print a ``KeyboardInterrupt`` traceback. Every file is written by then, so nothing is left to unwind.
    Not for a library caller's process (it would outlive the caller's own handlers)."""

    def end(signum: int, frame: FrameType | None) -> None:
        try:
            sys.stdout.flush()
        finally:
            name = signal.Signals(signum).name
            line = f"interrupted ({name}) while exiting: the command had finished, its files are written\n"
            os.write(2, line.encode())
            os._exit(130)

    for s in SIGNALS:
        signal.signal(s, end)


QUIET_TRACKERS = "ignore:resource_tracker:UserWarning"  # the warnings' text starts "resource_tracker: "


def trackers_ignore_sighup() -> None:
    """Start the resource trackers of multiprocessing (Dask's spawned workers) and of loky (the training
    pool) now, unless running, with SIGHUP blocked so that they never get it. A SIGHUP sent meanwhile is
    held, not lost: it is raised once the mask is restored."""
    from multiprocessing import resource_tracker

    from joblib.externals.loky.backend import resource_tracker as loky_tracker

    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    # A tracker whose pool's process was interrupted unlinks the semaphores it left and warns that they
    # "leaked" (two lines after the interrupt's one): it did its job, nothing is left for the user to do. The
    # trackers take their warning filters from the environment they start in; this process's is restored.
    warnings_env = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [warnings_env, QUIET_TRACKERS]))
    try:
        resource_tracker.ensure_running()
        loky_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        if warnings_env is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = warnings_env


@contextmanager
def children_ignore_sigint() -> Iterator[None]:
    """Processes started inside the block ignore Ctrl-C and SIGHUP (:data:`TERMINAL_SIGNALS`) from their
    first instruction: an ignored signal stays ignored across fork and exec, and Python then installs no
    handler of its own. This process ignores them too meanwhile, so keep the block to the start itself (the
    training pool's: some 30 ms); such a signal inside it is lost, never half-handled."""
    trackers_ignore_sighup()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in TERMINAL_SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextmanager
def spawned_ignore_sigint(folder: Path) -> Iterator[None]:
    """Processes that multiprocessing spawns inside the block (the local cluster's Dask workers, restarts
    included) ignore Ctrl-C from their first instruction, without this process ignoring it meanwhile.

    A terminal's Ctrl-C reaches every process of its group; a worker still importing Dask, before its
    preload ignores SIGINT, printed a traceback of its own. The workers are started on Dask's event loop
    thread, where no signal disposition can be set, so the spawn goes through a two-line ``sh`` script in
    ``folder`` that ignores SIGINT and SIGHUP (``trap '' INT HUP``: an ignored signal stays ignored across
    ``exec``) and runs this Python (multiprocessing's ``set_executable``)."""
    from multiprocessing import spawn

    trackers_ignore_sighup()
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python-ignoring-sigint"
    python = spawn.get_executable()
    wrapper.write_text(f"#!/bin/sh\ntrap '' INT HUP\nexec {shlex.quote(os.fsdecode(python))} \"$@\"\n")
    wrapper.chmod(0o700)
    spawn.set_executable(str(wrapper))
    try:
        yield
    finally:
        spawn.set_executable(python)


def ignore_sigint() -> None:
    """In a helper process (Dask worker, training pool): Ctrl-C and SIGHUP are the parent's to handle."""
    if threading.current_thread() is threading.main_thread():
        for s in TERMINAL_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
