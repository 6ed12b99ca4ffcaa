"""The command line's own options: ``--version``, ``-v``/``-q`` and ``$LAUNCHTUNE_LOG_LEVEL``."""

from __future__ import annotations

import logging

import pytest

import launchtune
from launchtune.pipeline import cli
from launchtune.pipeline.logs import level_from


@pytest.fixture(autouse=True)
def _restore_logger():
    """main() sets the ``launchtune`` logger's level and handler: put them back for the tests after."""
    logger = logging.getLogger("launchtune")
    level, handlers = logger.level, list(logger.handlers)
    yield
    logger.setLevel(level)
    logger.handlers[:] = handlers


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"launchtune {launchtune.__version__}\n"


@pytest.mark.parametrize(
    ("verbose", "quiet", "env", "level"),
    [
        (0, 0, {}, logging.INFO),
        (1, 0, {}, logging.DEBUG),
        (0, 1, {}, logging.WARNING),
        (0, 2, {}, logging.ERROR),
        (0, 0, {"LAUNCHTUNE_LOG_LEVEL": "warning"}, logging.WARNING),
        (0, 0, {"LAUNCHTUNE_LOG_LEVEL": " DEBUG "}, logging.DEBUG),
        (1, 0, {"LAUNCHTUNE_LOG_LEVEL": "ERROR"}, logging.DEBUG),  # a flag wins over the variable
    ],
)
def test_the_level_from_flags_and_the_environment(verbose, quiet, env, level):
    assert level_from(verbose, quiet, env) == level


def _messages(argv, capsys, monkeypatch, env=None):
    """What ``launchtune ARGV`` prints of a command that logs one message at each level."""

    def command(args):
        log = logging.getLogger("launchtune.pipeline.commands.fake")
        log.debug("debug line")
        log.info("info line")
        log.warning("warning line")
        return 0

    real = cli.build_parser

    def parser():
        p = real()
        p._subparsers._group_actions[0].choices["merge"].set_defaults(func=command)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    code = cli.main([*argv, "merge", "somewhere"])
    return code, capsys.readouterr()


def test_quiet_and_verbose_set_what_the_library_prints(capsys, monkeypatch):
    monkeypatch.delenv("LAUNCHTUNE_LOG_LEVEL", raising=False)
    assert _messages([], capsys, monkeypatch)[1].out == "info line\nwarning line\n"
    assert _messages(["-q"], capsys, monkeypatch)[1].out == "warning line\n"
    assert _messages(["-v"], capsys, monkeypatch)[1].out == "debug line\ninfo line\nwarning line\n"
    env = {"LAUNCHTUNE_LOG_LEVEL": "WARNING"}
    assert _messages([], capsys, monkeypatch, env)[1].out == "warning line\n"


def test_a_bad_level_variable_is_one_line(capsys, monkeypatch):
    code, captured = _messages([], capsys, monkeypatch, {"LAUNCHTUNE_LOG_LEVEL": "loud"})
    assert code == 2 and captured.out == ""
    assert captured.err == (
        "error: $LAUNCHTUNE_LOG_LEVEL: expected one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got 'loud'\n"
    )


def test_quiet_and_verbose_together_are_refused(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["-q", "-v", "merge", "x"])
    assert info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
