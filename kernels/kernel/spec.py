"""The kernel spec: a user's CUDA kernel and its tunable parameters, one YAML file, Kernel Tuner's vocabulary.

Everything is checked when the file is read, so a mistake is one line naming the file and the field before
any cluster starts: the source file exists and defines the ``__global__`` kernel, every expression
(restrictions, grid divisors, shapes, values) parses and names only what it may, the default configuration
obeys the restrictions, the arrays fit in memory. What only the device can tell (compiling, the compiled
function's limits) becomes an ``invalid`` row at measuring time instead.

Kernel Tuner's conventions carry over: tunable parameters reach the source as ``#define NAME VALUE``, as do
``grid_size_x/y/z``, ``block_size_x/y/z`` (the thread block, Kernel Tuner's 256 x 1 x 1 where a dimension is
not tuned) and ``kernel_tuner`` (1); ``grid_div_x/y/z`` list what divides the problem size (their product,
ceiling division; default the block size parameter of that dimension, 1 where it is not tuned).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from launchtune.kernels import files
from launchtune.kernels.kernel.arguments import ArgumentSpec, check_host, nbytes, npy_file, parse_arguments
from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.expressions import Expression, ExpressionError, parse
from launchtune.kernels.objective import DEFAULT as DEFAULT_OBJECTIVE
from launchtune.kernels.objective import Objective, ObjectiveError
from launchtune.kernels.objective import from_dict as objective_from_dict
from launchtune.kernels.space import Constraint, Param, Space, SpaceError

PROBLEM_NAMES = ("problem_size_x", "problem_size_y", "problem_size_z")
DEFAULT_BLOCK_NAMES = ("block_size_x", "block_size_y", "block_size_z")
# Kernel Tuner's thread block where a dimension's name is not a tunable parameter (util.py,
# get_thread_block_dimensions): a script moved over launches what it launched there.
UNTUNED_BLOCK = (256, 1, 1)
GRID_NAMES = ("grid_size_x", "grid_size_y", "grid_size_z")
# What a measurement gives, by name, for metrics and the objective: the median time of one launch (ms), and
# where the device has an energy counter (kernels.energy), the energy of one launch (mJ) and the mean power
# while launching (W).
MEASURED_NAMES = ("time", "energy_mJ", "power_W")
ENERGY_NAMES = ("energy_mJ", "power_W")
MAX_METRICS = 64

MAX_SPEC_BYTES = 256 * 1024
MAX_YAML_EVENTS = 50_000
MAX_YAML_DEPTH = 32
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


@dataclass(frozen=True)
class KernelSpec:
    path: Path
    source: Path
    code: str
    kernel_name: str
    params: tuple[Param, ...]
    default: dict[str, int]
    restrictions: tuple[Expression, ...]
    grid_div: tuple[
        tuple[Expression, ...] | None, tuple[Expression, ...] | None, tuple[Expression, ...] | None
    ]
    block_size_names: tuple[str, str, str]
    arguments: tuple[ArgumentSpec, ...]
    arguments_factory: str | None
    compiler_options: tuple[str, ...]
    atol: float
    rtol: float
    reference: str | None
    problem_size: tuple[int, ...] | None
    description: str = ""
    # the configurations a caller's own restriction (a Python function, run where it was written) allowed:
    # a .npy of one row per configuration, columns in tune_params order; None: no such list
    allowed: Path | None = None
    # sha256 of the spec's and the source's bytes as read: a worker handed a checked spec verifies it got
    # the same (``kernels.kernel.workload``), so a file replaced after the check is never compiled or imported
    digest: str = ""
    metrics: tuple[tuple[str, Expression], ...] = ()
    objective: Objective = DEFAULT_OBJECTIVE
    # parameters whose values are not integers (floats, text): the space holds each value's index, and
    # these tuples map it back to the value the source, restrictions and metrics see
    labels: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    shared_memory: Expression | None = None  # dynamic shared memory of a launch, bytes
    problem_exprs: tuple[Expression | None, ...] = ()  # problem_size dimensions given as expressions
    extra_sources: tuple[Path, ...] = ()  # further source files (headers the first includes)
    include_dirs: tuple[Path, ...] = ()  # the source's folder and every -I of compiler_options, absolute
    base_options: tuple[str, ...] = ()  # compiler_options as written (the ones passed have -I resolved)

    @property
    def kernel_base(self) -> str:
        """The kernel's name without template arguments."""
        match = TEMPLATED.fullmatch(self.kernel_name)
        return match["base"] if match else self.kernel_name

    def name_expression(self, config: Mapping[str, int]) -> str:
        """The name the compiler is asked for: a templated name with each parameter it names replaced by the
        configuration's value (``k<float, block_size_x>`` -> ``k<float, 128>``)."""
        match = TEMPLATED.fullmatch(self.kernel_name)
        if not match or match["args"] is None:
            return self.kernel_name
        actual = self.actual(config)
        args = re.sub(
            r"\b[A-Za-z_]\w*\b",
            lambda m: str(_define_text(actual[m[0]])) if m[0] in actual else m[0],
            match["args"],
        )
        return f"{match['base']}<{args}>"

    def actual(self, config: Mapping[str, int]) -> dict[str, Any]:
        """The configuration's values as the source sees them (an index of a labelled parameter becomes its
        float or text value)."""
        return {n: (self.labels[n][int(v)] if n in self.labels else v) for n, v in config.items()}

    def index_of(self, name: str, value: Any) -> int:
        """The space's value of a parameter's own value (its index where the parameter is labelled)."""
        if name in self.labels:
            return self.labels[name].index(value)
        return int(value)

    def shared_bytes(self, config: Mapping[str, int], problem: tuple[int, int, int]) -> int:
        """Dynamic shared memory a launch of ``config`` asks for (0 where the spec states none)."""
        if self.shared_memory is None:
            return 0
        return self.shared_memory.integer(self.values(problem, config))

    def launch_problem(
        self, config: Mapping[str, int], problem: tuple[int, int, int]
    ) -> tuple[int, int, int]:
        """The problem size the grid divides: ``problem`` where ``problem_size`` gave numbers, the value of
        each dimension given as an expression of the parameters."""
        if not any(self.problem_exprs):
            return problem
        values = self.values(problem, config)
        dims = list(problem)
        for i, expr in enumerate(self.problem_exprs):
            if expr is not None:
                dims[i] = expr.integer(values)
        return (dims[0], dims[1], dims[2])

    @property
    def metric_names(self) -> list[str]:
        return [name for name, _ in self.metrics]

    @property
    def needs_energy(self) -> bool:
        """Whether the objective reads the energy counter (then a device without one cannot tune it)."""
        needed = {self.objective.name}
        for name, expr in reversed(self.metrics):
            if name in needed:
                needed |= expr.names
        return bool(needed & set(ENERGY_NAMES))

    def evaluate(
        self, config: Mapping[str, int], problem: tuple[int, int, int], measured: Mapping[str, float | None]
    ) -> tuple[dict[str, float | None], float]:
        """Each metric's value (None where it reads a quantity not measured, or cannot be computed) and
        the objective's cost (``Objective.cost``: lower is better; NaN where it has no value)."""
        values: dict[str, Any] = {**self.values(problem, config)}
        values.update({k: v for k, v in measured.items() if v is not None})
        out: dict[str, float | None] = {}
        for name, expr in self.metrics:
            try:
                value = float(expr(values)) if expr.names <= set(values) else None
            except (ExpressionError, TypeError, ValueError):
                value = None
            out[name] = value
            if value is not None and math.isfinite(value):
                values[name] = value
        target = out.get(self.objective.name, measured.get(self.objective.name))
        return out, self.objective.cost(target)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def problem(self, size: str | Sequence[int] | None) -> tuple[int, int, int]:
        """The problem size as (x, y, z): ``size`` (``"4096x4096"`` or a sequence, x first), else the spec's
        ``problem_size``; missing dimensions are 1."""
        if size is None:
            if self.problem_size is None:
                raise SpecError(f"{self.path}: problem_size: not given, and no size was passed")
            dims = list(self.problem_size)
            if any(self.problem_exprs):  # a dimension of the parameters: its value at the default
                defaults = self.values((1, 1, 1), self.default)
                for i, expr in enumerate(self.problem_exprs):
                    if expr is not None:
                        dims[i] = expr.integer(defaults)
        elif isinstance(size, str):
            parts = size.lower().replace(" ", "").split("x")
            digits = len(parts) <= 3 and all(p.isascii() and p.isdigit() and len(p) < 20 for p in parts)
            if not digits or not all(0 < int(p) <= INT64_MAX for p in parts):
                raise SpecError(
                    f"{self.path}: size {size!r}: expected up to three positive extents like 4096x4096"
                )
            dims = [int(p) for p in parts]
        else:
            dims = [int(s) for s in size]
            if not 1 <= len(dims) <= 3 or min(dims) < 1 or max(dims) > INT64_MAX:
                raise SpecError(f"{self.path}: size {size!r}: expected one to three positive extents")
        x, y, z = (dims + [1, 1])[:3]
        return (x, y, z)

    def values(
        self, problem: tuple[int, int, int], config: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """The names an expression may read: the problem size and ``config`` (default: the fixed
        parameters, those with one value, which is what argument shapes may name)."""
        out: dict[str, Any] = dict(zip(PROBLEM_NAMES, problem, strict=True))
        if config is None:
            out.update(self.actual({p.name: p.values[0] for p in self.params if len(p.values) == 1}))
        else:
            out.update(self.actual(config))
        return out

    def space(self, problem: tuple[int, int, int]) -> Space:
        """The tunable parameters with the restrictions as constraints; a restriction that cannot be
        evaluated for a configuration (a division by zero) excludes it."""
        sizes = dict(zip(PROBLEM_NAMES, problem, strict=True))

        def holds(rule: Expression) -> Any:
            def check(config: Mapping[str, int]) -> bool:
                try:
                    return bool(rule({**sizes, **self.actual(config)}))
                except ExpressionError:
                    return False

            return check

        constraints = tuple(Constraint(f"restriction {r.text!r}", holds(r)) for r in self.restrictions)
        if self.allowed is not None:
            rows = np.load(self.allowed, allow_pickle=False)
            names = self.names
            if rows.ndim != 2 or rows.shape[1] != len(names) or not np.issubdtype(rows.dtype, np.integer):
                raise SpecError(
                    f"{self.path}: allowed: {self.allowed.name} holds {rows.dtype}{list(rows.shape)}; "
                    f"expected integer rows of {len(names)} values (one per tune_params entry)"
                )
            permitted = {tuple(int(v) for v in row) for row in rows}

            def listed(config: Mapping[str, int]) -> bool:
                return tuple(int(config[n]) for n in names) in permitted

            constraints += (Constraint(f"the configurations allowed in {self.allowed.name}", listed),)
        return Space(self.params, dict(self.default), constraints, name=f"kernel:{self.kernel_name}")

    def block(self, config: Mapping[str, int]) -> tuple[int, int, int]:
        b = [int(config.get(n, d)) for n, d in zip(self.block_size_names, UNTUNED_BLOCK, strict=True)]
        return (b[0], b[1], b[2])

    def grid(self, config: Mapping[str, int], problem: tuple[int, int, int]) -> tuple[int, int, int]:
        """Blocks per dimension: ceil(problem / product of grid_div) (Kernel Tuner's rule); a divisor that
        is not a positive whole number raises ``ExpressionError`` naming the field."""
        values = self.values(problem, config)
        problem = self.launch_problem(config, problem)
        out = []
        for dim, (divs, block_name) in enumerate(zip(self.grid_div, self.block_size_names, strict=True)):
            if divs is None:
                divisor = int(config.get(block_name, 1))
            else:
                divisor = 1
                for d in divs:
                    divisor *= d.integer(values)
            if divisor < 1:
                field = f"grid_div_{'xyz'[dim]}"
                raise ExpressionError(
                    f"{self.path}: {field}: divisor {divisor} for this configuration (must be >= 1)"
                )
            out.append(-(-problem[dim] // divisor))
        return (out[0], out[1], out[2])

    def defines(self, config: Mapping[str, int], problem: tuple[int, int, int]) -> dict[str, Any]:
        """What the source sees, in Kernel Tuner's order: grid sizes, block sizes, each parameter (a float
        or text value as its text), ``kernel_tuner``."""
        out: dict[str, Any] = dict(zip(GRID_NAMES, self.grid(config, problem), strict=True))
        out.update(zip(self.block_size_names, self.block(config), strict=True))
        actual = self.actual({n: config[n] for n in self.names})
        out.update({n: _define_text(v) for n, v in actual.items()})
        out["kernel_tuner"] = 1
        return out

    def code_references(self) -> list[tuple[str, str]]:
        """(field, module:function) of every piece of Python the spec names: code the workers would run,
        which the sweep allows as it allows a workload's."""
        refs = []
        if self.reference:
            refs.append((f"{self.path}: reference", self.reference))
        if self.arguments_factory:
            refs.append((f"{self.path}: arguments_factory", self.arguments_factory))
        return refs


def _define_text(value: Any) -> Any:
    """A value as ``#define`` text: integers as they are, floats as Python writes them (``0.5``), text as
    it is (Kernel Tuner's rule: ``"float"`` defines the type name)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | str):
        return value
    return repr(float(value))


def read_yaml(path: Path, with_bytes: bool = False) -> Any:
    """A kernel spec's mapping: bounded in bytes and YAML events, no aliases (a spec has no use for them,
    and they are how a few bytes of YAML stand for millions of nodes)."""
    try:  # size and kind checked before a byte is read (a 4 GB file, a FIFO: one line)
        raw = files.read_regular(path, "kernel spec", MAX_SPEC_BYTES, missing_ok=True)
    except files.FileRefused as exc:
        raise SpecError(str(exc)) from None
    if raw is None:
        raise SpecError(f"{path}: no such kernel spec")
    try:
        text = raw.decode("utf-8")
        depth = 0
        for count, event in enumerate(yaml.parse(text, Loader=yaml.SafeLoader)):
            if isinstance(event, yaml.AliasEvent):
                raise SpecError(f"{path}: YAML aliases (*name) are not allowed in a kernel spec")
            if count > MAX_YAML_EVENTS:
                raise SpecError(f"{path}: too large (over {MAX_YAML_EVENTS:,} YAML nodes)")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:  # the composer recurses: deeper is a RecursionError, not a spec
                    raise SpecError(f"{path}: nested deeper than {MAX_YAML_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        data = yaml.safe_load(text)
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None
    except ValueError as exc:  # an integer past Python's 4,300 digits
        raise SpecError(f"{path}: {str(exc).split(';')[0]}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise SpecError(f"{path}: malformed YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of keys to values at the top level")
    return (data, raw) if with_bytes else data


def _param_values(name: str, raw: Any, where: str) -> tuple[tuple[int, ...], tuple[Any, ...] | None]:
    """A parameter's values for the space, and their labels where they are not all integers (floats, text:
    the space holds indices 0..n-1)."""
    values = raw if isinstance(raw, list) else [raw]
    whole = all(isinstance(v, bool | int) or (isinstance(v, float) and v.is_integer()) for v in values)
    if whole:
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


def load_kernel_spec(path: str | Path) -> KernelSpec:
    """Read and check a kernel spec; ``SpecError`` naming the file and field for any mistake."""
    path = Path(path)
    data, spec_bytes = read_yaml(path, with_bytes=True)
    return spec_from_mapping(data, path, spec_bytes=spec_bytes)


def spec_from_mapping(
    data: Mapping[str, Any],
    path: Path,
    code: str | None = None,
    need_arguments: bool = True,
    spec_bytes: bytes = b"",
) -> KernelSpec:
    """Check a kernel spec's mapping, as read from ``path`` (which leads every message and anchors the
    relative ``source``). ``code`` is the CUDA source itself where it is not a file (the runtime tuner's
    ``autotune(source=...)``); ``need_arguments`` False where the arguments come from the caller instead;
    ``spec_bytes``, the file's bytes as read, enter the spec's digest."""
    f = f"{path}: "
    if not isinstance(data, Mapping):
        raise SpecError(f"{f}expected a mapping of keys to values")
    unknown = sorted(set(data) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise SpecError(
            f"{f}unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_REQUIRED + _OPTIONAL))})"
        )
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise SpecError(f"{f}missing key {missing[0]!r}")

    source_raw = data["source"]
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
    source = source_files[0]
    kernel_name = data["kernel_name"]
    match = TEMPLATED.fullmatch(kernel_name) if isinstance(kernel_name, str) else None
    if match is None or len(kernel_name) > 500:
        raise SpecError(
            f"{f}kernel_name: expected the kernel's name (an identifier, or a template like "
            f"'k<float, block_size_x>'), got {kernel_name!r}"
        )
    base = match["base"]
    if not kernel_defined(code, base):
        raise SpecError(f"{f}kernel_name: no '__global__ ... {base}(' in {source.name}")

    tune = data["tune_params"]
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
    names = [p.name for p in params]
    expr_names = names + list(PROBLEM_NAMES)

    block_names = data.get("block_size_names", list(DEFAULT_BLOCK_NAMES))
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

    restrictions_raw = data.get("restrictions") or []
    if isinstance(restrictions_raw, str):
        restrictions_raw = [restrictions_raw]
    if not isinstance(restrictions_raw, list) or len(restrictions_raw) > MAX_RESTRICTIONS:
        raise SpecError(f"{f}restrictions: expected a list of at most {MAX_RESTRICTIONS} expressions")
    try:
        restrictions = tuple(
            parse(r, expr_names, f"{f}restrictions[{i}]") for i, r in enumerate(restrictions_raw)
        )
        grid_div = tuple(_grid_div(data.get(f"grid_div_{d}"), expr_names, f"{f}grid_div_{d}") for d in "xyz")
    except ExpressionError as exc:
        raise SpecError(str(exc)) from None

    fixed_names = [p.name for p in params if len(p.values) == 1] + list(PROBLEM_NAMES)
    arguments: tuple[ArgumentSpec, ...] = ()
    if "arguments" in data:
        try:
            arguments = parse_arguments(data["arguments"], f"{f}arguments", fixed_names, path.parent)
        except ExpressionError as exc:
            raise SpecError(
                f"{exc} (argument shapes and values may name the problem size and parameters with one value)"
            ) from None
    factory = _code_target(data.get("arguments_factory"), f"{f}arguments_factory")
    if not arguments and factory is None and need_arguments:
        raise SpecError(f"{f}arguments: give the kernel's arguments (or an arguments_factory)")
    if arguments and factory is not None:
        raise SpecError(f"{f}arguments_factory: give either arguments or arguments_factory, not both")

    options = data.get("compiler_options") or []
    if (
        not isinstance(options, list)
        or len(options) > MAX_OPTIONS
        or not all(isinstance(o, str) for o in options)
    ):
        raise SpecError(f"{f}compiler_options: expected a list of strings like ['--use_fast_math']")
    passed, include_dirs = resolve_includes(options, path.parent, source.parent)

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

    shared = None
    if data.get("shared_memory") is not None:
        try:
            shared = parse(data["shared_memory"], expr_names, f"{f}shared_memory")
        except ExpressionError as exc:
            raise SpecError(
                f"{exc} (bytes of dynamic shared memory, over the parameters and problem size)"
            ) from None

    first = {p.name: p.values[0] for p in params}
    default_raw = data.get("default") or {}
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
    default = {**first, **chosen}

    metrics, objective = _metrics_and_objective(data, names, f)

    spec = KernelSpec(
        path=path,
        source=source,
        code=code,
        kernel_name=kernel_name,
        params=tuple(params),
        default=default,
        restrictions=restrictions,
        grid_div=grid_div,  # type: ignore[arg-type]
        block_size_names=(block_names[0], block_names[1], block_names[2]),
        arguments=arguments,
        arguments_factory=factory,
        compiler_options=tuple(passed),
        atol=_number(data.get("atol"), f"{f}atol", 1e-6),
        rtol=_number(data.get("rtol"), f"{f}rtol", 1e-5),
        reference=_code_target(data.get("reference"), f"{f}reference"),
        problem_size=problem_size,
        description=str(data.get("description", "")),
        allowed=npy_file(data["allowed"], f"{f}allowed", path.parent) if "allowed" in data else None,
        digest=hashlib.sha256(
            hashlib.sha256(spec_bytes).digest() + hashlib.sha256(raw_code).digest()
        ).hexdigest(),
        metrics=metrics,
        objective=objective,
        labels=labels,
        shared_memory=shared,
        problem_exprs=tuple(problem_exprs),
        extra_sources=tuple(source_files[1:]),
        include_dirs=tuple(include_dirs),
        base_options=tuple(options),
    )
    return spec


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


def _metrics_and_objective(
    data: Mapping[str, Any], names: Sequence[str], f: str
) -> tuple[tuple[tuple[str, Expression], ...], Objective]:
    """``metrics:`` (name -> expression over the parameters, the problem size, what was measured and the
    metrics before it, in order) and ``objective:`` ({minimize|maximize: a measured name or a metric})."""
    raw = data.get("metrics") or {}
    if not isinstance(raw, dict) or len(raw) > MAX_METRICS:
        raise SpecError(
            f"{f}metrics: expected a mapping of name to expression like {{ms_per_step: time / steps}}, "
            f"at most {MAX_METRICS}"
        )
    taken = set(names) | set(PROBLEM_NAMES) | set(GRID_NAMES) | set(MEASURED_NAMES) | {"kernel_tuner"}
    known = [*names, *PROBLEM_NAMES, *MEASURED_NAMES]
    metrics: list[tuple[str, Expression]] = []
    for name, text in raw.items():
        if not isinstance(name, str) or not name.isidentifier() or name in taken:
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


def check_for_problem(
    spec: KernelSpec,
    problem: tuple[int, int, int],
    memory_bytes: float | None,
    memory_of: str = "the device's",
) -> None:
    """What can be known about ``spec`` at ``problem`` without a device: the default configuration obeys
    the restrictions and has a grid, the arrays have shapes and fit in ``memory_bytes`` (None: no bound)."""
    try:
        space = spec.space(problem)
    except SpaceError as exc:
        raise SpecError(
            f"{spec.path}: default: the default configuration {spec.default} breaks {exc}"
        ) from None
    try:
        spec.grid(space.default, problem)
    except ExpressionError as exc:
        raise SpecError(f"{exc} (default configuration)") from None
    total = nbytes(spec.arguments, spec.values(problem))
    if memory_bytes is not None and total > memory_bytes:
        raise SpecError(
            f"{spec.path}: arguments: the arrays take {total / 1e9:,.2f} GB, more than {memory_of} "
            f"{memory_bytes / 1e9:,.1f} GB"
        )
    check_host(spec.arguments, spec.values(problem))  # what the worker would refuse, refused here
