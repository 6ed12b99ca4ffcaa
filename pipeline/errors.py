"""User mistakes become one clear line and exit code 2; everything else is a real bug and keeps its
traceback."""


class UserError(Exception):
    """A bad config, spec, path or dataset: the message names the file and the field."""

    exit_code = 2
