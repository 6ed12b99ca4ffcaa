"""A kernel's arguments, declared in its spec and made on the host (numpy), the same arrays for one seed.

Each entry of a spec's ``arguments`` is one kernel argument in order (Kernel Tuner's ``arguments`` list):
an array (``dtype``, ``shape`` as expressions, ``fill``) or a scalar (``value``). ``output: true`` marks what
a check compares (with the default configuration's output, or with ``answer: FILE.npy``, Kernel Tuner's
``answer``: the array every configuration must compute, beside the spec); ``constant: SYMBOL`` copies the
array into that ``__constant__`` symbol of every compiled module instead of passing it (Kernel Tuner's
``cmem_args``; ``argument: true`` passes it as well).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import files
from .errors import SpecError
from .expressions import Expression, ExpressionError, parse

FILLS = ("zeros", "uniform", "normal", "constant", "arange", "npy", "caller")
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64")  # fmt: skip
MAX_ARGUMENTS = 64
MAX_DIMS = 8
# One host array at most this many bytes: a typo'd shape (4096**4) is a line, not a machine out of memory.
MAX_ARRAY_BYTES = 1 << 40
_ARRAY_KEYS = {"name", "dtype", "shape", "fill", "output", "constant", "argument", "answer"}
_SCALAR_KEYS = {"name", "dtype", "value"}


@dataclass(frozen=True)
class Fill:
    kind: str
    args: tuple[float, ...] = ()
    path: Path | None = None
    # a .npy fill's header, read when the spec is (never its data): what the array will be
    npy_shape: tuple[int, ...] | None = None
    npy_dtype: str | None = None
    # a ``caller`` fill: the device array the Python API's caller gave, used where it was given (in the
    # caller's process, ``kernels.kernel.live``); the text names its contents (a fingerprint)
    token: str | None = None


@dataclass(frozen=True)
class ArgumentSpec:
    """One declared argument; ``shape`` and ``value`` are expressions over the problem size and the
    parameters with a single value (arguments are made once, before any configuration)."""

    name: str
    dtype: str
    where: str  # spec file and field, for messages
    shape: tuple[Expression, ...] | None = None  # None: a scalar
    fill: Fill | None = None
    value: Expression | None = None
    output: bool = False
    constant: str | None = None  # the __constant__ symbol it is copied into
    argument: bool = True  # passed to the kernel
    answer: Path | None = None  # the .npy every configuration's output must match (implies output)

    @property
    def is_scalar(self) -> bool:
        return self.shape is None


def _number_list(value: Any, where: str, count: int) -> tuple[float, ...]:
    """``count`` finite numbers (NaN or infinity as a fill's bound is a broken array, not a fill)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and count == 1:
        value = [value]
    if (
        not isinstance(value, list)
        or len(value) != count
        or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value)
    ):
        raise SpecError(f"{where}: expected {count} number(s), got {value!r}"[:300])
    try:
        out = tuple(float(v) for v in value)
    except OverflowError:  # an int past a float
        raise SpecError(f"{where}: {value!r} is past a float"[:300]) from None
    if not all(math.isfinite(v) for v in out):
        raise SpecError(f"{where}: expected finite numbers, got {value!r}")
    return out


def fits(value: float, dtype: str) -> bool:
    """Whether ``value`` is a value of ``dtype`` as it is: an integer within an integer type's range, a
    finite number within a float type's."""
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        return float(value).is_integer() and int(info.min) <= int(value) <= int(info.max)
    return math.isfinite(value) and abs(value) <= float(np.finfo(kind).max)


def _read_npy_header(path: Path, where: str) -> tuple[tuple[int, ...], str]:
    """A ``.npy`` file's shape and dtype from its header alone (``numpy.lib.format``), checked: a regular
    file, a version numpy writes, a plain numeric dtype (no objects: no pickle), no more than
    ``MAX_ARRAY_BYTES``, and as many bytes after the header as the header promises."""
    from numpy.lib import format as npy

    try:
        file = files.open_regular(path, "npy")
    except files.FileRefused as exc:
        raise SpecError(f"{where}: {exc}") from None
    assert file is not None
    with file:
        try:
            version = npy.read_magic(file)
            if version == (1, 0):
                shape, _, dtype = npy.read_array_header_1_0(file)
            elif version in ((2, 0), (3, 0)):
                shape, _, dtype = npy.read_array_header_2_0(file)
            else:
                raise ValueError(f"unknown .npy version {version}")
            start = file.tell()
            size = os.fstat(file.fileno()).st_size
        except (ValueError, OSError, SyntaxError, TypeError) as exc:
            why = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise SpecError(f"{where}: {path.name} is not a .npy array ({why})"[:300]) from None
    if dtype.hasobject or dtype.name not in DTYPES:
        raise SpecError(f"{where}: {path.name} holds {dtype}; a fill is one of {', '.join(DTYPES)}")
    need = math.prod(shape) * dtype.itemsize
    if need > MAX_ARRAY_BYTES:
        raise SpecError(f"{where}: {path.name} claims {need:,} bytes (at most {MAX_ARRAY_BYTES:,})")
    if size - start < need:
        raise SpecError(
            f"{where}: {path.name} holds {size - start:,} bytes of data, its header claims {need:,}"
        )
    return tuple(int(d) for d in shape), dtype.name


def _parse_fill(raw: Any, where: str, spec_dir: Path, dtype: str = "float64") -> Fill:
    defaults = {"uniform": (0.0, 1.0), "normal": (0.0, 1.0)}
    if isinstance(raw, str):
        if raw in ("zeros", "arange"):
            return Fill(raw)
        if raw in defaults:
            return Fill(raw, defaults[raw])
        raise SpecError(f"{where}: unknown fill {raw!r} (one of {', '.join(FILLS)})")
    if not isinstance(raw, dict) or len(raw) != 1:
        raise SpecError(
            f"{where}: expected one of {', '.join(FILLS)} or a one-key mapping like {{uniform: [0, 1]}}"
        )
    ((kind, value),) = raw.items()
    args = _number_list(value, f"{where}.{kind}", 2) if kind in defaults else ()
    if kind == "uniform":
        return Fill(kind, args)
    if kind == "normal":
        if args[1] < 0:
            raise SpecError(f"{where}.normal: the standard deviation {args[1]} must be >= 0")
        return Fill(kind, args)
    if kind == "constant":
        args = _number_list(value, f"{where}.constant", 1)
        if not fits(args[0], dtype):
            raise SpecError(f"{where}.constant: {value!r} is not a {dtype} value")
        return Fill(kind, args)
    if kind == "caller":
        if not isinstance(value, str) or not value:
            raise SpecError(f"{where}.caller: expected the text naming the caller's array")
        return Fill(kind, token=value)
    if kind == "npy":
        path = npy_file(value, f"{where}.npy", spec_dir)
        shape, npy_dtype = _read_npy_header(path, f"{where}.npy")
        return Fill(kind, path=path, npy_shape=shape, npy_dtype=npy_dtype)
    raise SpecError(f"{where}: unknown fill {kind!r} (one of {', '.join(FILLS)})")


def npy_file(value: Any, where: str, spec_dir: Path) -> Path:
    """A ``.npy`` file named relative to the spec's folder, and inside it (``files.resolve_inside``: no
    symlink or ``..`` out of the folder)."""
    if not isinstance(value, str) or not value.endswith(".npy"):
        raise SpecError(f"{where}: expected a .npy file name beside the spec, got {value!r}")
    try:
        path = files.resolve_inside(spec_dir, value, where)
    except files.FileRefused as exc:
        raise SpecError(str(exc)) from None
    if not path.exists():
        raise SpecError(f"{where}: no such file {path}")
    return path


def parse_arguments(raw: Any, where: str, names: Sequence[str], spec_dir: Path) -> tuple[ArgumentSpec, ...]:
    """The ``arguments`` list of a spec; ``names`` are what shapes and values may read."""
    if not isinstance(raw, list) or not raw:
        raise SpecError(f"{where}: expected a list of arguments (each a mapping with name, dtype, ...)")
    if len(raw) > MAX_ARGUMENTS:
        raise SpecError(f"{where}: {len(raw)} arguments (at most {MAX_ARGUMENTS})")
    out: list[ArgumentSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict):
            raise SpecError(f"{at}: expected a mapping with name, dtype and shape+fill or value")
        name = entry.get("name")
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError(f"{at}.name: expected an identifier, got {name!r}")
        if name in seen:
            raise SpecError(f"{at}.name: {name!r} declared twice")
        seen.add(name)
        scalar = "value" in entry
        allowed = _SCALAR_KEYS if scalar else _ARRAY_KEYS
        unknown = sorted(set(entry) - allowed)
        if unknown:
            kind = "a scalar (value)" if scalar else "an array"
            raise SpecError(
                f"{at}: unknown key {unknown[0]!r} for {kind} (allowed: {', '.join(sorted(allowed))})"
            )
        if scalar:
            value = parse(entry["value"], names, f"{at}.value")
            default = "float32" if isinstance(entry["value"], float) else "int32"
            dtype = _dtype(entry.get("dtype", default), f"{at}.dtype")
            out.append(ArgumentSpec(name, dtype, at, value=value))
            continue
        if "dtype" not in entry or "shape" not in entry:
            raise SpecError(f"{at}: an array needs dtype and shape (a scalar needs value)")
        dtype = _dtype(entry["dtype"], f"{at}.dtype")
        shape_raw = entry["shape"]
        if not isinstance(shape_raw, list):
            shape_raw = [shape_raw]
        if not 1 <= len(shape_raw) <= MAX_DIMS:
            raise SpecError(f"{at}.shape: expected 1 to {MAX_DIMS} dimensions, got {entry['shape']!r}")
        shape = tuple(parse(s, names, f"{at}.shape[{j}]") for j, s in enumerate(shape_raw))
        fill = _parse_fill(entry.get("fill", "zeros"), f"{at}.fill", spec_dir, dtype)
        flags = {}
        for key in ("output", "argument"):
            if key in entry and not isinstance(entry[key], bool):
                raise SpecError(f"{at}.{key}: expected true or false, got {entry[key]!r}")
            flags[key] = entry.get(key)
        constant = entry.get("constant")
        if constant is not None and (not isinstance(constant, str) or not constant.isidentifier()):
            raise SpecError(f"{at}.constant: expected the name of a __constant__ symbol, got {constant!r}")
        argument = flags["argument"] if flags["argument"] is not None else constant is None
        answer = npy_file(entry["answer"], f"{at}.answer", spec_dir) if "answer" in entry else None
        if answer is not None and (flags["output"] is False or not argument):
            raise SpecError(f"{at}.answer: an answer is checked on an output passed to the kernel")
        out.append(
            ArgumentSpec(
                name,
                dtype,
                at,
                shape,
                fill,
                output=bool(flags["output"]) or answer is not None,
                constant=constant,
                argument=argument,
                answer=answer,
            )
        )
    return tuple(out)


def _dtype(value: Any, where: str) -> str:
    if value not in DTYPES:
        raise SpecError(f"{where}: expected one of {', '.join(DTYPES)}, got {value!r}")
    return str(value)


def shape_of(arg: ArgumentSpec, values: Mapping[str, int]) -> tuple[int, ...]:
    """The array's shape for ``values`` (problem size and fixed parameters); every extent >= 1."""
    assert arg.shape is not None
    shape = []
    for expr in arg.shape:
        try:
            extent = expr.integer(values)
        except ExpressionError as exc:
            raise SpecError(str(exc)) from None
        if extent < 1:
            raise SpecError(f"{expr.where}: {expr.text!r} = {extent}; an extent must be >= 1")
        shape.append(extent)
    return tuple(shape)


def scalar_of(arg: ArgumentSpec, values: Mapping[str, int]) -> Any:
    """A scalar argument's value as a numpy scalar of its dtype; one that the dtype cannot hold as it is
    (``2**40`` into int32, ``1.5`` into an integer, ``1/0``, past float32) is one line naming the field."""
    assert arg.value is not None
    try:
        raw = arg.value(values)
    except ExpressionError as exc:
        raise SpecError(str(exc)) from None
    try:
        ok = fits(raw, arg.dtype)
    except OverflowError:  # an int past a float
        ok = False
    if not ok:
        shown = (
            f"a {raw.bit_length()}-bit integer"
            if isinstance(raw, int) and raw.bit_length() > 64
            else f"{raw:.6g}"
        )
        raise SpecError(f"{arg.where}.value: {arg.value.text!r} = {shown} is not a {arg.dtype} value")
    return np.dtype(arg.dtype).type(raw)


def check_host(args: Sequence[ArgumentSpec], values: Mapping[str, int]) -> None:
    """What ``make_host`` would refuse, found without making anything: every scalar fits its dtype, every
    ``.npy`` fill holds the declared shape and dtype (from its header)."""
    for arg in args:
        if arg.is_scalar:
            scalar_of(arg, values)
        elif arg.fill is not None and arg.fill.kind == "npy":
            shape = shape_of(arg, values)
            if (arg.fill.npy_shape, arg.fill.npy_dtype) != (shape, arg.dtype):
                assert arg.fill.path is not None
                raise SpecError(
                    f"{arg.where}.fill: {arg.fill.path.name} holds {arg.fill.npy_dtype}"
                    f"{list(arg.fill.npy_shape or ())}, declared {arg.dtype}{list(shape)}"
                )


def nbytes(args: Sequence[ArgumentSpec], values: Mapping[str, int]) -> int:
    """Bytes of every array together, computed from the declarations alone (nothing allocated)."""
    total = 0
    for arg in args:
        if arg.is_scalar:
            continue
        size = math.prod(shape_of(arg, values)) * np.dtype(arg.dtype).itemsize
        if size > MAX_ARRAY_BYTES:
            raise SpecError(f"{arg.where}: {size:,} bytes (at most {MAX_ARRAY_BYTES:,})")
        total += size
    return total


def make_host(arg: ArgumentSpec, index: int, values: Mapping[str, int], seed: int) -> Any:
    """The host value of ``arg``: a numpy array, or a numpy scalar of its dtype. Seeded per (``seed``,
    position ``index``): one spec and seed give the same arrays on every worker and rerun, and two arguments
    with the same fill get different values."""
    dtype = np.dtype(arg.dtype)
    if arg.is_scalar:
        return scalar_of(arg, values)
    shape = shape_of(arg, values)
    fill = arg.fill or Fill("zeros")
    rng = np.random.default_rng([seed, index])
    if fill.kind == "zeros":
        return np.zeros(shape, dtype)
    if fill.kind == "uniform":
        return rng.uniform(fill.args[0], fill.args[1], size=shape).astype(dtype)
    if fill.kind == "normal":
        return rng.normal(fill.args[0], fill.args[1], size=shape).astype(dtype)
    if fill.kind == "constant":
        return np.full(shape, fill.args[0], dtype)
    if fill.kind == "arange":
        return np.arange(math.prod(shape)).reshape(shape).astype(dtype)
    if fill.kind == "caller":
        raise SpecError(
            f"{arg.where}.fill: a device array given to tune_kernel, used only in that call's own process "
            "(call tune_kernel again, or give the array as numpy)"
        )
    assert fill.path is not None
    _read_npy_header(fill.path, f"{arg.where}.fill.npy")  # the file checked when the spec was may differ now
    try:
        data = np.load(fill.path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise SpecError(f"{arg.where}.fill: {fill.path.name}: {why}"[:300]) from None
    if data.shape != shape or data.dtype != dtype:
        raise SpecError(
            f"{arg.where}.fill: {fill.path.name} holds {data.dtype}{list(data.shape)}, "
            f"declared {dtype}{list(shape)}"
        )
    return data
