"""User mistakes become one clear line and exit code 2; everything else is a real bug and keeps its
traceback."""

from __future__ import annotations

import errno
import os


class UserError(Exception):
    """A bad config, spec, path or dataset: the message names the file and the field."""

    exit_code = 2


# Write errors that no retry fixes: the folder is not writable, read-only or full.
PERMANENT_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT})
# ... and paths that cannot be what they are asked to be (a file where a folder belongs, a name too long).
# An OSError of these on a path is the machine's or the user's, not a bug: one line naming the path.
PATH_ERRNOS = PERMANENT_ERRNOS | {
    errno.ENOENT,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ENAMETOOLONG,
    errno.EEXIST,
    errno.ELOOP,
    errno.EXDEV,
}


def path_error_line(exc: OSError) -> str | None:
    """One line naming the path and why, for an ``OSError`` of ``PATH_ERRNOS``; None for any other."""
    if exc.errno not in PATH_ERRNOS:
        return None
    why = os.strerror(exc.errno) if exc.errno else str(exc)
    where = exc.filename if exc.filename is not None else str(exc)
    return (
        f"{where}: {why}; files already written are kept, none half-written; "
        "fix it and run the same command again"
    )
