"""Command-line parsers whose mistakes are one line: ``error: MESSAGE (see PROG --help)``, exit 2, for
``launchtune`` and the ``python -m launchtune.kernels.cfd`` / ``.tridiag`` commands alike (argparse's own
prints the usage first, ten lines for one bad flag). Subcommands inherit it (argparse builds them with the
parent's class)."""

from __future__ import annotations

import argparse
from typing import NoReturn

MAX_MESSAGE = 300  # characters of argparse's message kept in the line


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line naming the flag, exit 2."""

    def error(self, message: str) -> NoReturn:
        if len(message) > MAX_MESSAGE:  # argparse quotes the value whole: a number of 5,000 digits
            message = message[: MAX_MESSAGE - 3] + "..."
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")
