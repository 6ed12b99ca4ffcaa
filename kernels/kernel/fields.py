"""Each field of a kernel spec read and checked: the YAML file itself, the source files, the parameters, the
problem size, the default, compiler options and includes, metrics and the objective. Each reader returns the
checked value or raises ``SpecError`` naming the file and field; ``spec.py`` assembles the ``KernelSpec``."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import files
from ..objective import Objective, ObjectiveError
from ..objective import from_dict as objective_from_dict
from ..space import Param
from ..yamlfile import YamlError, parse_yaml
from .errors import SpecError
from .expressions import Expression, ExpressionError, parse

PROBLEM_NAMES = ("problem_size_x", "problem_size_y", "problem_size_z")
DEFAULT_BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
# Kernel Tuner's thread block where a dimension's name is not a tunable parameter (util.py,
# get_thread_block_dimensions): a script moved over launches what it launched there.
UNTUNED_BLOCK = (256, 1, 1)
# What no CUDA device launches (every compute capability since 2.0): threads per block, and per dimension.
# The space leaves out a block over these (``KernelSpec.space``), as Kernel Tuner's Searchspace leaves out a
# block over the device's max_threads (1024 on every NVIDIA GPU), so a sample or a search's budget draws only
# configurations that can launch; what only the compiled kernel tells (its register-bound limit, shared
# memory) stays an invalid row at measuring time, as there.
MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
GRID_NAMES = ("grid_size_x", "grid_size_y", "grid_size_z")
# What a measurement gives, by name, for metrics and the objective: the median time of one launch (ms), and
# where the device has an energy counter (kernels.energy), the energy of one launch (mJ) and the mean power
# while launching (W).
MEASURED_NAMES = ("time", "energy_mJ", "power_W")
ENERGY_NAMES = ("energy_mJ", "power_W")
MAX_METRICS = 64

MAX_SPEC_BYTES = 256 * 1024
MAX_YAML_EVENTS = 50_000  # a kernel spec's YAML nodes (kernels.yamlfile bounds the depth)
# A parameter's values reach the shards' int64 columns and the source's #defines
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_SOURCE_BYTES = 4 * 1024 * 1024
MAX_PARAMS = 64
MAX_VALUES = 100_000  # values of one parameter
MAX_RESTRICTIONS = 256
MAX_OPTIONS = 64
TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")

_REQUIRED = ("source", "kernel_name", "tune_params")
_OPTIONAL = (
    "description",
    "problem_size",
    "default",
    "restrictions",
    "grid_div_x",
    "grid_div_y",
    "grid_div_z",
    "block_size_names",
    "arguments",
    "arguments_factory",
    "compiler_options",
    "atol",
    "rtol",
    "reference",
    "allowed",
    "metrics",
    "objective",
    "shared_memory",
)
MAX_SOURCES = 32
MAX_TEXT_VALUE = 200
# a templated kernel's name, Kernel Tuner's ``kernel_name="k<float, block_size_x>"``: parameters named among
# the template arguments become their values
TEMPLATED = re.compile(r"(?P<base>[A-Za-z_]\w*)\s*(<(?P<args>[^;{}()]*)>)?")


def _define_text(value: Any) -> Any:
    """A value as ``#define`` text: integers as they are, floats as Python writes them (``0.5``), text as
    it is (Kernel Tuner's rule: ``"float"`` defines the type name)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | str):
        return value
    return repr(float(value))


def read_yaml(path: Path, with_bytes: bool = False) -> Any:
    """A kernel spec's mapping, read by the one YAML loader (``kernels.yamlfile``: no aliases, a key once)
    within a kernel spec's bounds: bytes and YAML nodes."""
    try:  # size and kind checked before a byte is read (a 4 GB file, a FIFO: one line)
        raw = files.read_regular(path, "kernel spec", MAX_SPEC_BYTES, missing_ok=True)
    except files.FileRefused as exc:
        raise SpecError(str(exc)) from None
    if raw is None:
        raise SpecError(f"{path}: no such kernel spec")
    try:
        data = parse_yaml(raw, path, MAX_YAML_EVENTS)
    except YamlError as exc:
        raise SpecError(str(exc)) from None
    return (data, raw) if with_bytes else data


def is_whole(values: list[Any]) -> bool:
    """Whether a parameter's values are integers for the space (else labels: the space holds indices)."""
    return all(isinstance(v, bool | int) or (isinstance(v, float) and v.is_integer()) for v in values)


def _param_values(name: str, raw: Any, where: str) -> tuple[tuple[int, ...], tuple[Any, ...] | None]:
    """A parameter's values for the space, and their labels where they are not all integers (floats, text:
    the space holds indices 0..n-1)."""
    values = raw if isinstance(raw, list) else [raw]
    if is_whole(values):
        return _int_values(name, raw, where), None
    if not values or len(values) > MAX_VALUES:
        raise SpecError(f"{where}: expected 1 to {MAX_VALUES:,} values, got {len(values)}")
    out: list[Any] = []
    for v in values:
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, float) and not math.isfinite(v):
            raise SpecError(f"{where}: {v!r} is not a finite number")
        if isinstance(v, str) and (
            not v.strip() or len(v) > MAX_TEXT_VALUE or "\n" in v or "\r" in v or "\\" in v
        ):
            raise SpecError(f"{where}: text values are one line of at most {MAX_TEXT_VALUE} characters")
        if not isinstance(v, int | float | str):
            raise SpecError(f"{where}: values must be numbers or text, got {v!r}")
        out.append(v)
    if len(set(out)) != len(out):
        raise SpecError(f"{where}: lists a value twice")
    return tuple(range(len(out))), tuple(out)


def _int_values(name: str, raw: Any, where: str) -> tuple[int, ...]:
    values = raw if isinstance(raw, list) else [raw]
    if not values or len(values) > MAX_VALUES:
        raise SpecError(f"{where}: expected 1 to {MAX_VALUES:,} values, got {len(values)}")
    out = []
    for v in values:
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not isinstance(v, int):
            raise SpecError(f"{where}: values must be integers (use 0/1 for flags), got {v!r}"[:300])
        if not INT64_MIN <= v <= INT64_MAX:
            raise SpecError(f"{where}: {v:.3g} is past a 64-bit integer")
        out.append(v)
    if len(set(out)) != len(out):
        raise SpecError(f"{where}: lists a value twice")
    return tuple(out)


def _grid_div(raw: Any, names: Sequence[str], where: str) -> tuple[Expression, ...] | None:
    if raw is None:
        return None
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise SpecError(f"{where}: expected an expression or a list of them")
    exprs = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(raw, list) else where
        try:
            expr = parse(item, names, at)
        except ExpressionError as exc:
            raise SpecError(str(exc)) from None
        if not expr.names:  # a constant: zero is known now
            value = expr({})
            if not value or value < 0:
                raise SpecError(f"{at}: divisor {item!r} must be a positive number")
        exprs.append(expr)
    return tuple(exprs)


def _code_target(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not TARGET.fullmatch(raw):
        raise SpecError(f"{where}: expected module:function like mypkg.check:reference, got {raw!r}")
    return raw


def _number(raw: Any, where: str, default: float) -> float:
    if raw is None:
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw >= 0 or not math.isfinite(raw):
        raise SpecError(f"{where}: expected a number >= 0, got {raw!r}")
    return float(raw)


def kernel_defined(code: str, name: str) -> bool:
    """Whether ``code`` has ``__global__ ... name(`` (text search, as Kernel Tuner's own check; comments
    are not parsed)."""
    return re.search(r"__global__[^;{}]*?\b" + re.escape(name) + r"\s*\(", code) is not None


def read_sources(source_raw: Any, path: Path, code: str | None) -> tuple[list[Path], str, bytes]:
    """``source``: one file or a list (the kernel's first), each beside the spec, a regular file, bounded;
    (the files, the first's text, its bytes). ``code``: the text given instead of a file (``autotune``)."""
    f = f"{path}: "
    sources_raw = source_raw if isinstance(source_raw, list) else [source_raw]
    if (
        not sources_raw
        or len(sources_raw) > MAX_SOURCES
        or not all(isinstance(x, str) and x.strip() for x in sources_raw)
    ):
        raise SpecError(
            f"{f}source: expected the CUDA source file's path (relative to this file), or a list of paths "
            f"whose first holds the kernel and the rest are files it includes (at most {MAX_SOURCES})"
        )
    if code is not None:  # the source's text given (``autotune(source=...)``), not a file
        source_files = [Path(sources_raw[0])]
        raw_code = code.encode()
        if len(raw_code) > MAX_SOURCE_BYTES:
            raise SpecError(f"{f}source: over {MAX_SOURCE_BYTES:,} bytes")
    else:
        source_files, texts = [], []
        for raw_file in sources_raw:
            try:  # beside the spec (not /etc/passwd), a regular file, at most MAX_SOURCE_BYTES read
                file = files.resolve_inside(path.parent, raw_file, f"{f}source")
                if not file.exists():
                    raise SpecError(f"{f}source: no such file {file}")
                read = files.read_regular(file, "CUDA source", MAX_SOURCE_BYTES)
            except files.FileRefused as exc:
                raise SpecError(f"{f}source: {exc}" if not str(exc).startswith(f) else str(exc)) from None
            assert read is not None
            source_files.append(file)
            texts.append(read)
        raw_code = texts[0]
        try:
            code = raw_code.decode("utf-8")
        except UnicodeDecodeError:
            raise SpecError(f"{f}source: {source_files[0]} is not UTF-8 text") from None
    return source_files, code, raw_code


def read_params(tune: Any, f: str) -> tuple[list[Param], dict[str, tuple[Any, ...]]]:
    """``tune_params``: each parameter and its values; a parameter of floats or text has its labels (the
    values as the source sees them), its values being their indices."""
    if not isinstance(tune, dict) or not tune:
        raise SpecError(f"{f}tune_params: expected a mapping of parameter name to its list of values")
    if len(tune) > MAX_PARAMS:
        raise SpecError(f"{f}tune_params: {len(tune)} parameters (at most {MAX_PARAMS})")
    reserved = set(PROBLEM_NAMES) | set(GRID_NAMES) | {"kernel_tuner"}
    params = []
    labels: dict[str, tuple[Any, ...]] = {}
    for name, raw in tune.items():
        if not isinstance(name, str) or not name.isidentifier() or name in reserved:
            raise SpecError(f"{f}tune_params: {name!r} is not a usable parameter name (an identifier, not "
                            f"{', '.join(sorted(reserved))})")  # fmt: skip
        values, label = _param_values(name, raw, f"{f}tune_params.{name}")
        params.append(Param(name, values))
        if label is not None:
            labels[name] = label
    return params, labels


def read_problem_size(
    data: Mapping[str, Any], names: list[str], f: str
) -> tuple[tuple[int, ...] | None, list[Expression | None]]:
    """``problem_size``: one to three positive integers (x first), or expressions of the parameters (the
    launch's size per configuration); (the numbers, 1 where an expression stands, and the expressions)."""
    problem_size = None
    problem_exprs: list[Expression | None] = []
    if "problem_size" in data:
        raw = data["problem_size"]
        dims = raw if isinstance(raw, list) else [raw]
        if not 1 <= len(dims) <= 3 or any(
            isinstance(d, bool)
            or (isinstance(d, int) and not 1 <= d <= INT64_MAX)
            or not isinstance(d, int | str)
            for d in dims
        ):
            raise SpecError(
                f"{f}problem_size: expected one to three positive integers (x first), or expressions of the "
                f"parameters, got {raw!r}"
            )
        numbers = []
        for i, d in enumerate(dims):
            if isinstance(
                d, str
            ):  # Kernel Tuner's problem_size of parameters: the launch's, per configuration
                try:
                    problem_exprs.append(parse(d, names, f"{f}problem_size[{i}]"))
                except ExpressionError as exc:
                    raise SpecError(f"{exc} (a problem size may name the parameters)") from None
                numbers.append(1)
            else:
                problem_exprs.append(None)
                numbers.append(d)
        problem_size = tuple(numbers)
        problem_exprs += [None] * (3 - len(problem_exprs))
    return problem_size, problem_exprs


def read_default(
    default_raw: Any, params: Sequence[Param], labels: Mapping[str, tuple[Any, ...]], f: str
) -> dict[str, int]:
    """``default``: the configuration to compare against, each parameter's first value where not given."""
    first = {p.name: p.values[0] for p in params}
    default_raw = default_raw or {}
    if not isinstance(default_raw, dict):
        raise SpecError(f"{f}default: expected a mapping of parameter name to value")
    chosen = {}
    for name, value in default_raw.items():
        if name not in first:
            raise SpecError(f"{f}default: unknown parameter {name!r}")
        if name in labels:
            if value not in labels[name]:
                raise SpecError(f"{f}default.{name}: {value!r} is not one of its values")
            chosen[name] = labels[name].index(value)
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{f}default.{name}: expected an integer, got {value!r}")
        chosen[name] = value
    return {**first, **chosen}


def resolve_includes(
    options: Sequence[str], spec_dir: Path, source_dir: Path
) -> tuple[list[str], list[Path]]:
    """``compiler_options`` as they reach the compiler, and the folders a source's includes are found in.

    A user writes ``-I.`` meaning the spec's folder, but the compiler runs in the worker's working directory:
    each relative ``-I`` (``-Idir``, ``-I dir``, ``--include-path=dir``, ``--include-path dir``) is made
    absolute against the spec's folder, and the source's own folder goes first on the include path, as a
    compiler given the file would search it."""
    passed: list[str] = [f"-I{source_dir}"]
    dirs: list[Path] = [source_dir]
    pending = None
    for option in options:
        if pending is not None:
            folder = (spec_dir / option).resolve()
            passed += [pending, str(folder)]
            dirs.append(folder)
            pending = None
            continue
        if option in ("-I", "--include-path"):
            pending = option
            continue
        for prefix in ("--include-path=", "-I"):
            if option.startswith(prefix):
                folder = (spec_dir / option[len(prefix) :]).resolve()
                passed.append(f"{prefix}{folder}")
                dirs.append(folder)
                break
        else:
            passed.append(option)
    if pending is not None:
        passed.append(pending)  # the compiler says what is missing after it
    return passed, dirs


def metrics_and_objective(
    data: Mapping[str, Any], names: Sequence[str], f: str
) -> tuple[tuple[tuple[str, Expression], ...], Objective]:
    """``metrics:`` (name -> expression over the parameters, the problem size, what was measured and the
    metrics before it, in order) and ``objective:`` ({minimize|maximize: a measured name or a metric})."""
    raw = data.get("metrics")
    if raw is None:  # ``metrics:`` alone; ``[]``, ``0`` or ``false`` are refused, not read as none
        raw = {}
    if not isinstance(raw, dict) or len(raw) > MAX_METRICS:
        raise SpecError(
            f"{f}metrics: expected a mapping of name to expression like {{ms_per_step: time / steps}}, "
            f"at most {MAX_METRICS}"
        )
    taken = set(names) | set(PROBLEM_NAMES) | set(GRID_NAMES) | set(MEASURED_NAMES) | {"kernel_tuner"}
    known = [*names, *PROBLEM_NAMES, *MEASURED_NAMES]
    metrics: list[tuple[str, Expression]] = []
    for raw_name, text in raw.items():
        # as Python reads an identifier (NFKC): a fullwidth ``ｔｉｍｅ`` is ``time``, not a new metric
        name = unicodedata.normalize("NFKC", raw_name) if isinstance(raw_name, str) else raw_name
        if not isinstance(name, str) or not name.isidentifier() or name in taken or name in dict(metrics):
            raise SpecError(
                f"{f}metrics: {name!r} is not a usable metric name (an identifier that is not a parameter, "
                f"a problem size or one of {', '.join(MEASURED_NAMES)})"
            )
        try:
            expr = parse(text, known, f"{f}metrics.{name}")
        except ExpressionError as exc:
            raise SpecError(
                f"{exc} (a metric is an expression over the parameters, problem_size_x/y/z, "
                f"{', '.join(MEASURED_NAMES)} and earlier metrics, not Python code)"
            ) from None
        metrics.append((name, expr))
        taken.add(name)
        known.append(name)
    try:
        objective = objective_from_dict(data.get("objective"))
    except ObjectiveError as exc:
        raise SpecError(f"{f}objective: {exc}") from None
    allowed = [*MEASURED_NAMES, *(n for n, _ in metrics)]
    if objective.name not in allowed:
        raise SpecError(
            f"{f}objective: {objective.name!r} is neither measured nor a metric "
            f"(one of: {', '.join(allowed)})"
        )
    return tuple(metrics), objective


def read_block_names(raw: Any, labels: Mapping[str, Any], f: str) -> list[str]:
    """``block_size_names``: the parameters that are the thread block's x, y, z (Kernel Tuner's names by
    default); a block size takes whole numbers."""
    block_names = list(DEFAULT_BLOCK_NAMES) if raw is None else raw
    if (
        not isinstance(block_names, list)
        or not 1 <= len(block_names) <= 3
        or not all(isinstance(n, str) and n.isidentifier() for n in block_names)
    ):
        raise SpecError(f"{f}block_size_names: expected one to three identifiers, got {block_names!r}")
    block_names = (list(block_names) + list(DEFAULT_BLOCK_NAMES[len(block_names) :]))[:3]
    for name in labels:
        if name in block_names:
            raise SpecError(f"{f}tune_params.{name}: a block size takes whole numbers")
    return block_names


def read_compiler_options(raw: Any, f: str) -> list[str]:
    """``compiler_options``: a list of strings, as the user wrote them (includes resolved apart)."""
    options = raw or []
    if (
        not isinstance(options, list)
        or len(options) > MAX_OPTIONS
        or not all(isinstance(o, str) for o in options)
    ):
        raise SpecError(f"{f}compiler_options: expected a list of strings like ['--use_fast_math']")
    return options
