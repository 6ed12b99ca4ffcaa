"""Your own CUDA kernel, launched in a tuned configuration while your program runs: ``autotune(...)``.

``autotune`` wraps a kernel so that each call launches it once, in the configuration the runtime tuner says
(a :class:`~launchtune.kernels.autotune.tuning.Tuning` per key, the object that tunes the CFD solver's kernels
too: a scan over the candidates during the real calls, then the fastest locked). What is tunable is said
in the ``kernel`` workload's vocabulary (Kernel Tuner's): ``tune_params``, ``restrictions`` (expressions,
never code), ``grid_div_x/y/z``, ``block_size_names``, read by the one kernel-spec parser
(``kernels.kernel.spec``), so a kernel spec YAML works as it is (``spec=``).

Two kinds of kernel:

- a compiled CuPy ``RawKernel`` (or a ``RawModule`` function): only its launch is tuned (the block sizes and
  what the grid rules divide by);
- a source and a kernel name (or a spec): every parameter reaches the source as ``#define NAME VALUE``; each
  candidate is compiled ahead on a thread pool while the GPU runs the calls, and a call that reaches a
  candidate still compiling waits for it before the launch's events, never inside a timed launch.

Which tuning applies is chosen by ``key(*args)`` (shapes, dtypes, sizes: one tuner per key, so a shape that
comes back finds its pick locked). Candidates come from a sweep's tuning table (``table=``: this GPU class's
ranked picks at the nearest size) or, without one, a seeded sample of the space with the default first.
Locked picks are remembered per (GPU class, kernel identity, key) in the user's cache directory
(``kernels.autotune.cache``), so the next run of the program tunes nothing.

While tuning, every call still computes its answer with exactly one launch. Only ``verify=True`` launches
more: once per candidate, the default configuration then the candidate from the same state, outputs compared
(a candidate that differs is dropped, with the reason); the arguments the kernel reads and writes in place
(``restore=``) are saved before and restored between those launches (Triton's ``restore_value``; a saved copy
also restores zeros, Triton's ``reset_to_zero``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..files import FileRefused, read_regular
from ..kernel.fields import MAX_SOURCE_BYTES
from ..kernel.spec import KernelSpec, read_yaml, spec_from_mapping
from ..tuning_table import read, table_file
from .cache import PickCache
from .tuned import WHERE, AutotuneError, KeyState, TunedKernel
from .tuner import REDUCERS

__all__ = ["AutotuneError", "KeyState", "TunedKernel", "autotune"]


def autotune(
    kernel: Any = None,
    *,
    source: str | Path | None = None,
    kernel_name: str | None = None,
    spec: str | Path | None = None,
    tune_params: Mapping[str, Sequence[int]] | None = None,
    restrictions: Sequence[str] | str | None = None,
    default: Mapping[str, int] | None = None,
    grid_div_x: Any = None,
    grid_div_y: Any = None,
    grid_div_z: Any = None,
    block_size_names: Sequence[str] | None = None,
    compiler_options: Sequence[str] | None = None,
    problem_size: Callable[..., Sequence[int]] | Sequence[int] | None = None,
    key: Callable[..., Hashable] | None = None,
    constants: Mapping[str, int] | None = None,
    table: str | Path | None = None,
    seed_count: int = 8,
    scan: int | None = 100,
    seed: int = 0,
    samples: int = 3,
    warmup: int = 1,
    reducer: str = "median",
    period: int | None = None,
    period_s: float | None = None,
    time_idle: int = 100,
    restore: Sequence[int | str] = (),
    verify: bool = False,
    atol: float | None = None,
    rtol: float | None = None,
    cache: bool | str | Path = True,
    cache_id: str | None = None,
    compile_workers: int | str = "auto",
    log: bool = False,
    gpu_class: str | None = None,
    clock: Any = None,
    wallclock: Callable[[], float] = time.monotonic,
    build: Callable[[str], tuple[Any, Any]] | None = None,
) -> TunedKernel:
    """Wrap a CUDA kernel so each call launches it in a tuned configuration (module docstring).

    The kernel: ``kernel`` (a compiled CuPy ``RawKernel``: only launch parameters), or ``source`` (CUDA text
    or a ``.cu`` path) with ``kernel_name``, or ``spec`` (a kernel spec YAML; keyword arguments given here
    override its keys). ``tune_params``, ``restrictions``, ``default``, ``grid_div_x/y/z``,
    ``block_size_names``, ``compiler_options``: as in a kernel spec (``docs/kernel.md``).

    ``problem_size``: the extent the grid rules divide (x first), a tuple or a function of the call's
    arguments; with a spec it is read from the first argument whose declared shape names it, else the
    spec's ``problem_size``. ``key``: a function of the call's arguments (default: the problem size and the
    arrays' shapes and dtypes); each distinct value is tuned once. ``constants``: ``__constant__`` symbol ->
    index of the argument copied into it before each launch (a spec's ``constant:`` arguments by default).

    ``table``: a sweep folder or tuning table; its ``seed_count`` best configurations for this GPU class at
    the nearest size are the candidates. Without one (or no entry for this class), ``scan`` configurations
    drawn with ``seed`` (None: all), the default first. ``samples`` launches per candidate (odd for the
    median), after ``warmup`` launches that pick nothing; ``period`` launches or ``period_s`` seconds after
    a lock, tune again (default: never). One idle launch in ``time_idle`` is timed, for the statistics.

    ``restore``: arguments (indices, or names of a spec's arguments) the kernel reads and writes in place;
    ``verify``: compare each candidate's outputs once with the default's (within ``atol + rtol * |default|``,
    the spec's tolerances by default) and drop one that differs. ``cache``: True (the user's cache
    directory), a file path, or False; ``cache_id`` names a kernel object that carries no ``.code``.
    ``gpu_class``, ``clock``, ``wallclock`` and ``build`` (source -> (module, function)) replace the
    device's own (tests drive the tuner with a fake clock and a fake kernel).
    """
    restrictions = _check_inputs(kernel, source, spec, key, problem_size, restrictions)
    overrides = {
        "kernel_name": kernel_name,
        "tune_params": None if tune_params is None else {k: list(v) for k, v in dict(tune_params).items()},
        "restrictions": None if restrictions is None else list(restrictions),
        "default": None if default is None else dict(default),
        "grid_div_x": grid_div_x,
        "grid_div_y": grid_div_y,
        "grid_div_z": grid_div_z,
        "block_size_names": None if block_size_names is None else list(block_size_names),
        "compiler_options": None if compiler_options is None else list(compiler_options),
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    parsed = _parse(kernel, source, spec, overrides)
    if not parsed.objective.is_time:  # it times launches; it does not evaluate metrics or read energy
        raise AutotuneError(
            f"{WHERE}: spec: objective {parsed.objective.describe()}: the run-time tuner ranks by time only "
            "(tune for it with launchtune.tune_kernel, or leave objective: out of the spec)"
        )
    _check_tuning(samples, reducer, scan, table)
    restore_idx, roles = _argument_roles(parsed, kernel, problem_size, restore, constants, cache, cache_id)
    return TunedKernel(
        parsed,
        kernel=kernel,
        problem_size=problem_size,
        key=key,
        constants=roles,
        table=table,
        seed_count=seed_count,
        scan=scan,
        seed=seed,
        tuner_options={
            "samples": samples,
            "warmup": warmup,
            "reducer": reducer,
            "period": period,
            "period_s": period_s,
            "time_idle": time_idle,
        },
        restore=restore_idx,
        verify=verify,
        atol=parsed.atol if atol is None else float(atol),
        rtol=parsed.rtol if rtol is None else float(rtol),
        cache=None if cache is False else PickCache(None if cache is True else cache),
        identity=_identity(parsed, kernel, cache_id),
        compile_workers=compile_workers,
        log=log,
        gpu_class=gpu_class,
        clock=clock,
        wallclock=wallclock,
        build=build,
    )


def _check_inputs(
    kernel: Any,
    source: str | Path | None,
    spec: str | Path | None,
    key: Any,
    problem_size: Any,
    restrictions: Sequence[str] | str | None,
) -> Sequence[str] | None:
    """The kernel given one way, ``key`` and ``problem_size`` of the right kinds, restrictions that are data;
    returns the restrictions as a list."""
    if key is not None and not callable(key):
        raise AutotuneError(f"{WHERE}: key: expected a function of the call's arguments, got {key!r}")
    if problem_size is not None and not callable(problem_size) and not _int_sequence(problem_size):
        raise AutotuneError(
            f"{WHERE}: problem_size: expected one to three positive integers or a function of the call's "
            f"arguments, got {problem_size!r}"
        )
    given = [n for n, v in (("kernel", kernel), ("source", source), ("spec", spec)) if v is not None]
    if len(given) != 1:
        raise AutotuneError(
            f"{WHERE}: give exactly one of kernel= (a compiled RawKernel), source= (with kernel_name=) or "
            f"spec= (a kernel spec YAML); got {', '.join(given) or 'none'}"
        )
    if isinstance(restrictions, str):
        restrictions = [restrictions]
    for i, rule in enumerate(restrictions or ()):
        if callable(rule):
            raise AutotuneError(
                f"{WHERE}: restrictions[{i}]: a Python function; write it as an expression string such as "
                "'block_size_x * block_size_y <= 1024' (restrictions are data, never code)"
            )
    return restrictions


def _parse(
    kernel: Any, source: str | Path | None, spec: str | Path | None, overrides: dict[str, Any]
) -> KernelSpec:
    """The kernel spec the tuner works from, read by the one kernel-spec parser: a spec file with
    ``overrides`` over its keys, or the keyword arguments over a source (or a compiled kernel's)."""
    if spec is not None:
        spec_path = Path(spec)
        data = dict(read_yaml(spec_path))
        data.update(overrides)
        return spec_from_mapping(data, spec_path)
    code, label = _code_of(kernel, source)
    if "kernel_name" not in overrides:
        name = getattr(kernel, "name", None) if kernel is not None else None
        if not isinstance(name, str):
            raise AutotuneError(f"{WHERE}: kernel_name: give the __global__ function's name")
        overrides["kernel_name"] = name
    if "tune_params" not in overrides:
        raise AutotuneError(f"{WHERE}: tune_params: give the tunable parameters and their values")
    data = {"source": label, **overrides}
    if not code:  # a compiled kernel without source text: its rules are parsed against a stand-in
        code = f"__global__ void {overrides['kernel_name']}() {{}}"
    return spec_from_mapping(data, Path(WHERE), code=code, need_arguments=False)


def _argument_roles(
    parsed: KernelSpec,
    kernel: Any,
    problem_size: Any,
    restore: Sequence[int | str],
    constants: Mapping[str, int] | None,
    cache: bool | str | Path,
    cache_id: str | None,
) -> tuple[list[int], dict[str, int]]:
    """Which arguments are restored around extra launches and copied into ``__constant__`` memory, as
    argument indices; refuses what a compiled kernel cannot do and a cache without a key."""
    if problem_size is None and parsed.problem_size is None and not parsed.arguments:
        raise AutotuneError(
            f"{WHERE}: problem_size: give the extent the grid rules divide (x first): a tuple, or a function "
            "of the call's arguments such as lambda out, *rest: out.shape[::-1]"
        )
    if kernel is not None:
        _check_launch_only(parsed)
        if constants:
            raise AutotuneError(
                f"{WHERE}: constants: needs source= or spec= (a compiled kernel's module is yours: fill its "
                "__constant__ memory yourself)"
            )
    arg_names = [a.name for a in parsed.arguments if a.argument]
    if not isinstance(restore, Sequence) or isinstance(restore, str | bytes):  # 5 was "not iterable"
        raise AutotuneError(
            f"{WHERE}: restore: expected a list of argument indices or names, got a {type(restore).__name__}"
        )
    restore_idx = [_arg_index(r, arg_names, "restore") for r in restore]
    if constants is None:
        constants = {
            a.constant: arg_names.index(a.name) for a in parsed.arguments if a.constant and a.argument
        }
    for symbol, index in constants.items():
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise AutotuneError(f"{WHERE}: constants.{symbol}: expected an argument index, got {index!r}")
    if cache is True and kernel is not None and getattr(kernel, "code", None) is None and cache_id is None:
        raise AutotuneError(
            f"{WHERE}: cache: this kernel object carries no source (.code) to key the cache by; "
            "pass cache_id='...' or cache=False"
        )
    return restore_idx, dict(constants)


def _check_tuning(samples: int, reducer: str, scan: int | None, table: str | Path | None) -> None:
    """The tuner's options, and a table that can be read (it fails here, not at the first call)."""
    if samples < 1 or (reducer == "median" and samples % 2 == 0):
        raise AutotuneError(f"{WHERE}: samples: must be >= 1 and odd for the median (got {samples})")
    if reducer not in REDUCERS:
        raise AutotuneError(f"{WHERE}: reducer: one of {', '.join(REDUCERS)} (got {reducer!r})")
    if scan is not None and (isinstance(scan, bool) or not isinstance(scan, int) or scan < 1):
        raise AutotuneError(f"{WHERE}: scan: a number of configurations >= 1, or None for all (got {scan!r})")
    if table is not None:
        if not Path(table).exists():
            raise AutotuneError(f"{WHERE}: table: no such sweep folder or tuning table {table}")
        read(table_file(table))  # a table that cannot be read fails here, not at the first call


def _int_sequence(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and 1 <= len(value) <= 3
        and all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v > 0 for v in value)
    )


def _code_of(kernel: Any, source: str | Path | None) -> tuple[str | None, str]:
    """The CUDA text and a label for messages: ``source`` (text, or a ``.cu`` path), else the compiled
    kernel's ``.code`` (None where it has none)."""
    if kernel is not None:
        return getattr(kernel, "code", None), "<compiled kernel>"
    assert source is not None
    text = str(source)
    if "\n" not in text and len(text) < 4096 and text.endswith((".cu", ".cuh", ".h")):
        return _read_source(Path(text)), text
    if isinstance(source, Path):
        return _read_source(source), str(source)
    return text, "<source>"


def _read_source(path: Path) -> str:
    """A ``.cu`` file's text through the bounded reader (a FIFO, a device, a file past the cap: one line)."""
    try:
        data = read_regular(path, "CUDA source", MAX_SOURCE_BYTES)
        assert data is not None
        return data.decode("utf-8")
    except FileRefused as exc:
        raise AutotuneError(f"{WHERE}: source: {exc}") from None
    except UnicodeDecodeError:
        raise AutotuneError(f"{WHERE}: source: {path}: not UTF-8 text") from None


def _check_launch_only(spec: KernelSpec) -> None:
    """A compiled kernel can be tuned only in its launch: every parameter a block size or a grid divisor."""
    in_grid = set().union(*(e.names for divs in spec.grid_div if divs for e in divs))
    for dim, divs in enumerate(spec.grid_div):
        if divs is None and spec.block_size_names[dim] in spec.names:
            in_grid.add(spec.block_size_names[dim])
    for name in spec.names:
        if name not in spec.block_size_names and name not in in_grid:
            raise AutotuneError(
                f"{WHERE}: tune_params.{name}: a compiled kernel can tune only its launch, and {name} is "
                f"neither a block size ({', '.join(spec.block_size_names)}) nor in a grid_div rule; pass "
                "source= and kernel_name= to tune it as a #define"
            )


def _arg_index(item: int | str, names: list[str], what: str) -> int:
    if isinstance(item, int) and not isinstance(item, bool) and 0 <= item < 2**31:
        return item
    # an index past 2**31 is none, and the repr of one past 4,300 digits raises: no number in the message
    if isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 31:
        raise AutotuneError(f"{WHERE}: {what}: an integer out of range is not an argument index")
    if isinstance(item, str) and item in names:
        return names.index(item)
    known = f" (the spec's arguments: {', '.join(names)})" if names else ""
    raise AutotuneError(f"{WHERE}: {what}: {item!r} is not an argument index or name{known}")


def _identity(spec: KernelSpec, kernel: Any, cache_id: str | None) -> str:
    """What the cache keys a kernel by: its source and every rule that decides its configurations."""
    blob = json.dumps(
        {
            "code": spec.code if kernel is None else getattr(kernel, "code", None),
            "cache_id": cache_id,
            "kernel": spec.kernel_name,
            "params": {p.name: list(p.values) for p in spec.params},
            "default": spec.default,
            "restrictions": [r.text for r in spec.restrictions],
            "grid_div": [[e.text for e in d] if d else None for d in spec.grid_div],
            "blocks": list(spec.block_size_names),
            "options": list(spec.compiler_options),
            "launch_only": kernel is not None,
        },
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
