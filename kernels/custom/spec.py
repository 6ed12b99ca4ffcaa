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

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from launchtune.kernels.custom.arguments import ArgumentSpec, nbytes, parse_arguments
from launchtune.kernels.custom.errors import SpecError
from launchtune.kernels.custom.expressions import Expression, ExpressionError, parse
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
    "metrics",
    "objective",
)


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
    metrics: tuple[tuple[str, Expression], ...] = ()
    objective: Objective = DEFAULT_OBJECTIVE

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
        elif isinstance(size, str):
            parts = size.lower().replace(" ", "").split("x")
            if not all(p.isdigit() and int(p) > 0 for p in parts) or len(parts) > 3:
                raise SpecError(
                    f"{self.path}: size {size!r}: expected up to three positive extents like 4096x4096"
                )
            dims = [int(p) for p in parts]
        else:
            dims = [int(s) for s in size]
            if not 1 <= len(dims) <= 3 or min(dims) < 1:
                raise SpecError(f"{self.path}: size {size!r}: expected one to three positive extents")
        x, y, z = (dims + [1, 1])[:3]
        return (x, y, z)

    def values(
        self, problem: tuple[int, int, int], config: Mapping[str, int] | None = None
    ) -> dict[str, int]:
        """The names an expression may read: the problem size and ``config`` (default: the fixed
        parameters, those with one value, which is what argument shapes may name)."""
        out = dict(zip(PROBLEM_NAMES, problem, strict=True))
        if config is None:
            out.update({p.name: p.values[0] for p in self.params if len(p.values) == 1})
        else:
            out.update(config)
        return out

    def space(self, problem: tuple[int, int, int]) -> Space:
        """The tunable parameters with the restrictions as constraints; a restriction that cannot be
        evaluated for a configuration (a division by zero) excludes it."""
        sizes = dict(zip(PROBLEM_NAMES, problem, strict=True))

        def holds(rule: Expression) -> Any:
            def check(config: Mapping[str, int]) -> bool:
                try:
                    return bool(rule({**sizes, **config}))
                except ExpressionError:
                    return False

            return check

        constraints = tuple(Constraint(f"restriction {r.text!r}", holds(r)) for r in self.restrictions)
        return Space(self.params, dict(self.default), constraints, name=f"kernel:{self.kernel_name}")

    def block(self, config: Mapping[str, int]) -> tuple[int, int, int]:
        b = [int(config.get(n, d)) for n, d in zip(self.block_size_names, UNTUNED_BLOCK, strict=True)]
        return (b[0], b[1], b[2])

    def grid(self, config: Mapping[str, int], problem: tuple[int, int, int]) -> tuple[int, int, int]:
        """Blocks per dimension: ceil(problem / product of grid_div) (Kernel Tuner's rule); a divisor that
        is not a positive whole number raises ``ExpressionError`` naming the field."""
        values = self.values(problem, config)
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

    def defines(self, config: Mapping[str, int], problem: tuple[int, int, int]) -> dict[str, int]:
        """What the source sees, in Kernel Tuner's order: grid sizes, block sizes, each parameter,
        ``kernel_tuner``."""
        out: dict[str, int] = dict(zip(GRID_NAMES, self.grid(config, problem), strict=True))
        out.update(zip(self.block_size_names, self.block(config), strict=True))
        out.update({n: int(config[n]) for n in self.names})
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


def read_yaml(path: Path) -> dict[str, Any]:
    """A kernel spec's mapping: bounded in bytes and YAML events, no aliases (a spec has no use for them,
    and they are how a few bytes of YAML stand for millions of nodes)."""
    if not path.is_file():
        raise SpecError(f"{path}: no such kernel spec")
    raw = path.read_bytes()
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError(f"{path}: {len(raw):,} bytes; a kernel spec holds at most {MAX_SPEC_BYTES:,}")
    try:
        text = raw.decode("utf-8")
        for count, event in enumerate(yaml.parse(text, Loader=yaml.SafeLoader)):
            if isinstance(event, yaml.AliasEvent):
                raise SpecError(f"{path}: YAML aliases (*name) are not allowed in a kernel spec")
            if count > MAX_YAML_EVENTS:
                raise SpecError(f"{path}: too large (over {MAX_YAML_EVENTS:,} YAML nodes)")
        data = yaml.safe_load(text)
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise SpecError(f"{path}: malformed YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of keys to values at the top level")
    return data


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
            raise SpecError(f"{where}: values must be integers (use 0/1 for flags), got {v!r}")
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
    data = read_yaml(path)
    f = f"{path}: "
    unknown = sorted(set(data) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise SpecError(
            f"{f}unknown key {unknown[0]!r} (allowed: {', '.join(sorted(_REQUIRED + _OPTIONAL))})"
        )
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise SpecError(f"{f}missing key {missing[0]!r}")

    source_raw = data["source"]
    if not isinstance(source_raw, str) or not source_raw.strip():
        raise SpecError(f"{f}source: expected the CUDA source file's path (relative to this file)")
    source = (path.parent / source_raw).resolve()
    if not source.is_file():
        raise SpecError(f"{f}source: no such file {source}")
    if source.stat().st_size > MAX_SOURCE_BYTES:
        raise SpecError(f"{f}source: {source} is over {MAX_SOURCE_BYTES:,} bytes")
    try:
        code = source.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{f}source: {source} is not UTF-8 text") from None
    kernel_name = data["kernel_name"]
    if not isinstance(kernel_name, str) or not kernel_name.isidentifier():
        raise SpecError(f"{f}kernel_name: expected the kernel's name (an identifier), got {kernel_name!r}")
    if not kernel_defined(code, kernel_name):
        raise SpecError(f"{f}kernel_name: no '__global__ ... {kernel_name}(' in {source.name}")

    tune = data["tune_params"]
    if not isinstance(tune, dict) or not tune:
        raise SpecError(f"{f}tune_params: expected a mapping of parameter name to its list of values")
    if len(tune) > MAX_PARAMS:
        raise SpecError(f"{f}tune_params: {len(tune)} parameters (at most {MAX_PARAMS})")
    reserved = set(PROBLEM_NAMES) | set(GRID_NAMES) | {"kernel_tuner"}
    params = []
    for name, raw in tune.items():
        if not isinstance(name, str) or not name.isidentifier() or name in reserved:
            raise SpecError(f"{f}tune_params: {name!r} is not a usable parameter name (an identifier, not "
                            f"{', '.join(sorted(reserved))})")  # fmt: skip
        params.append(Param(name, _int_values(name, raw, f"{f}tune_params.{name}")))
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
    if not arguments and factory is None:
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

    problem_size = None
    if "problem_size" in data:
        raw = data["problem_size"]
        dims = raw if isinstance(raw, list) else [raw]
        if not 1 <= len(dims) <= 3 or any(
            isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in dims
        ):
            raise SpecError(
                f"{f}problem_size: expected one to three positive integers (x first), got {raw!r}"
            )
        problem_size = tuple(dims)

    first = {p.name: p.values[0] for p in params}
    default_raw = data.get("default") or {}
    if not isinstance(default_raw, dict):
        raise SpecError(f"{f}default: expected a mapping of parameter name to value")
    for name, value in default_raw.items():
        if name not in first:
            raise SpecError(f"{f}default: unknown parameter {name!r}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{f}default.{name}: expected an integer, got {value!r}")
    default = {**first, **default_raw}

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
        compiler_options=tuple(options),
        atol=_number(data.get("atol"), f"{f}atol", 1e-6),
        rtol=_number(data.get("rtol"), f"{f}rtol", 1e-5),
        reference=_code_target(data.get("reference"), f"{f}reference"),
        problem_size=problem_size,
        description=str(data.get("description", "")),
        metrics=metrics,
        objective=objective,
    )
    return spec


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
