"""A Kernel Tuner cache file's text as checked values: its JSON closed as Kernel Tuner closes an interrupted
run's file, inflation bounded, numbers finite, repeats a list of finite numbers. ``datasets`` builds a
``Dataset`` from them."""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from launchtune.kernels.files import loads_json

from ..errors import UserError


def parse(text: str) -> Any:
    """A cache file's JSON, closed as Kernel Tuner closes it: a run appends each entry (``"key": {...},``) to
    an open file and closes the braces at its end, so an interrupted run leaves the file without its two
    closing braces (and with a trailing comma); Kernel Tuner's ``read_cache`` closes such a file before
    parsing, and so does this. By hand because ``kernel_tuner`` is an optional extra, its reader cannot open
    a gzipped cache, and it rewrites the file it reads (opening it for appending). A key twice in one object
    is ``files.DuplicateKey`` (``json`` alone keeps the last one)."""
    try:
        return loads_json(text)
    except json.JSONDecodeError as exc:
        text = text.strip()
        if not text or text[-3:] in ("}\n}", "}}}"):
            raise exc from None
        try:
            return loads_json(text.removesuffix(",") + "}\n}")
        except json.JSONDecodeError:
            raise exc from None


# A Kernel Tuner cache, compressed or not, is read whole: at most this many bytes of JSON (a 4,000-point
# cache is a few MB; a gzip of zeros that inflates without end is one line, not a process out of memory).
MAX_CACHE_BYTES = 1 << 30


def gunzip(data: bytes, path: Path) -> str:
    """``data`` inflated, at most ``MAX_CACHE_BYTES`` of it (``gzip.decompress`` has no cap)."""
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as file:
        text = file.read(MAX_CACHE_BYTES + 1)
    if len(text) > MAX_CACHE_BYTES:
        raise UserError(f"{path}: inflates past {MAX_CACHE_BYTES:,} bytes; not a Kernel Tuner cache we read")
    return text.decode()


def finite(value: Any) -> bool:
    """A number (not a flag) that is a finite float: an int past a float's range is not."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def repeats(rep: Any, where: str) -> np.ndarray:
    """A configuration's recorded repeats: a list of numbers (empty where there are none); anything else
    (text, nested lists) is one line naming the entry. Repeats that are not finite or whose sum overflows
    (a 102-line "Input y contains NaN" in ``combine`` before) are left out: the configuration's own time
    answers for it, and one past any measurement counts as failed (``usable``)."""
    if rep is None or (isinstance(rep, list) and not rep):
        return np.empty(0)
    if not isinstance(rep, list) or any(isinstance(t, bool) or not isinstance(t, int | float) for t in rep):
        raise UserError(f"{where}: expected a list of numbers, got {rep!r}"[:300])
    try:
        out = np.asarray(rep, dtype=float)
    except OverflowError:  # an int past a float
        return np.empty(0)
    with np.errstate(over="ignore", invalid="ignore"):
        if not np.isfinite(out).all() or not np.isfinite(out.sum()):
            return np.empty(0)
    return out
