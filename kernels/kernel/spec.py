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

from ..objective import DEFAULT as DEFAULT_OBJECTIVE
from ..objective import Objective
from ..space import Constraint, Param, Space, SpaceError, listed_rows
from .arguments import ArgumentSpec, check_host, nbytes, npy_file, parse_arguments
from .errors import SpecError
from .expressions import Expression, ExpressionError, parse
from .fields import (  # noqa: F401  (the spec's vocabulary, imported from here too)
    _OPTIONAL,
    _REQUIRED,
    DEFAULT_BLOCK_NAMES,
    ENERGY_NAMES,
    GRID_NAMES,
    INT64_MAX,
    MAX_BLOCK,
    MAX_OPTIONS,
    MAX_RESTRICTIONS,
    MAX_SPEC_BYTES,
    MAX_THREADS,
    MEASURED_NAMES,
    PROBLEM_NAMES,
    TEMPLATED,
    UNTUNED_BLOCK,
    _code_target,
    _define_text,
    _grid_div,
    _number,
    kernel_defined,
    metrics_and_objective,
    read_block_names,
    read_compiler_options,
    read_default,
    read_params,
    read_problem_size,
    read_sources,
    read_yaml,
    resolve_includes,
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
            except (ExpressionError, TypeError, ValueError, ArithmeticError):  # 2**2000: past a float
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

        def holds_rows(rule: Expression) -> Any:
            def check(columns: Mapping[str, np.ndarray]) -> np.ndarray | None:
                n = len(next(iter(columns.values()))) if columns else 1
                values = {k: np.full(n, v) for k, v in sizes.items() if k in rule.names}
                for name, col in columns.items():
                    if name not in rule.names:
                        continue
                    if name in self.labels:  # the index of a labelled parameter: its float or text value
                        labels = np.asarray(self.labels[name])
                        if labels.dtype.kind not in "biuf":
                            return None  # text: asked one configuration at a time
                        col = labels[col]
                    values[name] = col
                return rule.truth_of_rows(values, n)

            return check

        constraints = tuple(
            Constraint(
                f"restriction {r.text!r}",
                holds(r),
                holds_rows(r),
                tuple(n for n in self.names if n in r.names),
            )
            for r in self.restrictions
        )
        constraints += self._launchable()
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

            constraints += (
                Constraint(
                    f"the configurations allowed in {self.allowed.name}",
                    listed,
                    listed_rows(self.params, rows),
                ),
            )
        return Space(self.params, dict(self.default), constraints, name=f"kernel:{self.kernel_name}")

    def _launchable(self) -> tuple[Constraint, ...]:
        """The thread block within what CUDA launches (``MAX_THREADS`` in all, ``MAX_BLOCK`` per dimension),
        Kernel Tuner's max_threads restriction: none where no block dimension is tuned."""
        tuned = tuple(n for n in self.block_size_names if n in self.names)
        if not tuned:
            return ()
        block = " * ".join(self.block_size_names)
        why = f"the thread block ({block}) over {MAX_THREADS} threads or {MAX_BLOCK} (CUDA's limits)"

        def fits(config: Mapping[str, int]) -> bool:
            block = self.block(self.actual(config))
            return math.prod(block) <= MAX_THREADS and all(
                1 <= b <= m for b, m in zip(block, MAX_BLOCK, strict=True)
            )

        def fits_rows(columns: Mapping[str, np.ndarray]) -> np.ndarray | None:
            if any(n in self.labels for n in tuned):
                return None  # a labelled block size: asked one configuration at a time
            n = len(next(iter(columns.values())))
            total = np.ones(n, dtype=np.int64)
            ok = np.ones(n, dtype=bool)
            for name, untuned, most in zip(self.block_size_names, UNTUNED_BLOCK, MAX_BLOCK, strict=True):
                b = columns[name] if name in columns else np.full(n, untuned, dtype=np.int64)
                ok &= (b >= 1) & (b <= most)
                total *= np.clip(b, 0, MAX_THREADS + 1)  # clipped: no overflow of the product
            return ok & (total <= MAX_THREADS)

        return (Constraint(why, fits, fits_rows, tuned),)

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
    _check_keys(data, f)
    source_files, code, raw_code = read_sources(data["source"], path, code)
    source = source_files[0]
    kernel_name = _kernel_name(data["kernel_name"], code, source, f)
    params, labels = read_params(data["tune_params"], f)
    names = [p.name for p in params]
    expr_names = names + list(PROBLEM_NAMES)
    block_names = read_block_names(data.get("block_size_names"), labels, f)
    restrictions, grid_div = _launch_expressions(data, expr_names, f)
    fixed_names = [p.name for p in params if len(p.values) == 1] + list(PROBLEM_NAMES)
    arguments, factory = _arguments_of(data, fixed_names, path, need_arguments, f)
    options = read_compiler_options(data.get("compiler_options"), f)
    passed, include_dirs = resolve_includes(options, path.parent, source.parent)
    problem_size, problem_exprs = read_problem_size(data, names, f)
    shared = _shared_memory(data.get("shared_memory"), expr_names, f)
    default = read_default(data.get("default"), params, labels, f)

    metrics, objective = metrics_and_objective(data, names, f)

    spec = KernelSpec(
        path=path,
        source=source,
        code=code,
        kernel_name=kernel_name,
        params=tuple(params),
        default=default,
        restrictions=restrictions,
        grid_div=grid_div,
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


def _check_keys(data: Any, f: str) -> None:
    """A mapping, of the spec's keys only, with every required one."""
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


def _kernel_name(kernel_name: Any, code: str, source: Path, f: str) -> str:
    """``kernel_name``: an identifier or a template instance whose base the source defines as a kernel."""
    match = TEMPLATED.fullmatch(kernel_name) if isinstance(kernel_name, str) else None
    if match is None or len(kernel_name) > 500:
        raise SpecError(
            f"{f}kernel_name: expected the kernel's name (an identifier, or a template like "
            f"'k<float, block_size_x>'), got {kernel_name!r}"
        )
    base = match["base"]
    if not kernel_defined(code, base):
        raise SpecError(f"{f}kernel_name: no '__global__ ... {base}(' in {source.name}")
    return kernel_name


def _launch_expressions(
    data: Mapping[str, Any], expr_names: list[str], f: str
) -> tuple[tuple[Expression, ...], tuple[Any, ...]]:
    """The restrictions (one expression or a list) and ``grid_div_x/y/z``, parsed over the parameters and
    the problem size."""
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
    return restrictions, grid_div


def _arguments_of(
    data: Mapping[str, Any], fixed_names: list[str], path: Path, need_arguments: bool, f: str
) -> tuple[tuple[ArgumentSpec, ...], str | None]:
    """The kernel's arguments as the spec lists them, or the function that makes them: one of the two
    (neither only where ``need_arguments`` is False)."""
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
    return arguments, factory


def _shared_memory(value: Any, expr_names: list[str], f: str) -> Expression | None:
    """``shared_memory``: bytes of dynamic shared memory, an expression of the parameters and problem size."""
    if value is None:
        return None
    try:
        return parse(value, expr_names, f"{f}shared_memory")
    except ExpressionError as exc:
        raise SpecError(
            f"{exc} (bytes of dynamic shared memory, over the parameters and problem size)"
        ) from None


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
