"""Your own CUDA kernel, launched in a tuned configuration while your program runs: ``autotune(...)``.

``autotune`` wraps a kernel so that each call launches it once, in the configuration the runtime tuner says
(:class:`~launchtune.kernels.autotune.tuner.Autotuner`, the same HOOMD-blue state machine that tunes the CFD
solver: a scan over the candidates during the real calls, then the fastest locked). What is tunable is said
in the ``kernel`` workload's vocabulary (Kernel Tuner's): ``tune_params``, ``restrictions`` (expressions,
never code), ``grid_div_x/y/z``, ``block_size_names``, read by the one kernel-spec parser
(``kernels.custom.spec``), so a kernel spec YAML works as it is (``spec=``).

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
import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from launchtune.kernels.autotune.cache import PickCache
from launchtune.kernels.autotune.log import LaunchLog
from launchtune.kernels.autotune.table import read_table_doc, seed_configs, table_file
from launchtune.kernels.autotune.tuner import IDLE, REDUCERS, Autotuner, TunerError
from launchtune.kernels.custom.compile import (
    Compiler,
    build_function,
    cache_key,
    default_workers,
    source_with_defines,
)
from launchtune.kernels.custom.errors import SpecError
from launchtune.kernels.custom.expressions import ExpressionError
from launchtune.kernels.custom.spec import PROBLEM_NAMES, KernelSpec, read_yaml, spec_from_mapping

WHERE = "autotune"
Config = dict[str, int]


class AutotuneError(TunerError):
    """An ``autotune(...)`` call that cannot work; the message names the argument and what is wrong."""


@dataclass
class KeyState:
    """One key's tuning: its problem size, candidates, tuner, and what happened to it."""

    key: Hashable
    key_text: str
    problem: tuple[int, int, int]
    tuner: Autotuner
    seed: str
    cache: str  # "hit", "miss", "off"
    checked: set[tuple[int, ...]] = field(default_factory=set)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    verify_launches: int = 0
    compile_wait_s: float = 0.0
    saved_scans: int = 0
    queued: bool = False


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
    if spec is not None:
        spec_path = Path(spec)
        data = dict(read_yaml(spec_path))
        data.update(overrides)
        parsed = spec_from_mapping(data, spec_path)
    else:
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
        parsed = spec_from_mapping(data, Path(WHERE), code=code, need_arguments=False)
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
    if samples < 1 or (reducer == "median" and samples % 2 == 0):
        raise AutotuneError(f"{WHERE}: samples: must be >= 1 and odd for the median (got {samples})")
    if reducer not in REDUCERS:
        raise AutotuneError(f"{WHERE}: reducer: one of {', '.join(REDUCERS)} (got {reducer!r})")
    if scan is not None and (isinstance(scan, bool) or not isinstance(scan, int) or scan < 1):
        raise AutotuneError(f"{WHERE}: scan: a number of configurations >= 1, or None for all (got {scan!r})")
    if table is not None:
        if not Path(table).exists():
            raise AutotuneError(f"{WHERE}: table: no such sweep folder or tuning table {table}")
        read_table_doc(table_file(table))  # a table that cannot be read fails here, not at the first call
    arg_names = [a.name for a in parsed.arguments if a.argument]
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
    return TunedKernel(
        parsed,
        kernel=kernel,
        problem_size=problem_size,
        key=key,
        constants=dict(constants),
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


class TunedKernel:
    """A kernel that launches in its tuned configuration: call it as the kernel's own arguments."""

    def __init__(
        self,
        spec: KernelSpec,
        *,
        kernel: Any,
        problem_size: Any,
        key: Callable[..., Hashable] | None,
        constants: dict[str, int],
        table: str | Path | None,
        seed_count: int,
        scan: int | None,
        seed: int,
        tuner_options: dict[str, Any],
        restore: list[int],
        verify: bool,
        atol: float,
        rtol: float,
        cache: PickCache | None,
        identity: str,
        compile_workers: int | str,
        log: bool,
        gpu_class: str | None,
        clock: Any,
        wallclock: Callable[[], float],
        build: Callable[[str], tuple[Any, Any]] | None,
    ):
        self.spec, self.kernel, self.names = spec, kernel, spec.names
        self._problem_size, self._key = problem_size, key
        self.constants, self.table, self.seed_count, self.scan, self.seed = (
            constants,
            table,
            seed_count,
            scan,
            seed,
        )
        self.tuner_options, self.restore, self.verify, self.atol, self.rtol = (
            tuner_options,
            restore,
            verify,
            atol,
            rtol,
        )
        self.cache, self.identity = cache, identity
        self.default_param = tuple(int(spec.default[n]) for n in self.names)
        self.calls = 0
        self.keys: dict[Hashable, KeyState] = {}
        self.log = LaunchLog(self.names) if log else None
        self._wallclock = wallclock
        self._views: dict[tuple[int, str], Any] = {}
        self._cp: Any = None
        if build is None and kernel is None or clock is None or gpu_class is None:
            from launchtune.kernels.backend import get_backend
            from launchtune.kernels.device import describe_device

            backend = get_backend("auto")
            if build is None and kernel is None and not backend.is_gpu:
                raise AutotuneError(f"{WHERE}: source: compiling CUDA needs a GPU, and none is visible")
            self._cp = backend.xp if backend.is_gpu else None
            clock = clock if clock is not None else backend.stopwatch()
            gpu_class = gpu_class or str(describe_device(backend)["gpu_class"])
        self.clock, self.gpu_class = clock, str(gpu_class)
        self.compiler: Compiler | None = None
        if kernel is None:
            if build is None:
                cp, options, name = self._cp, spec.compiler_options, spec.kernel_name
                device_id = cp.cuda.Device().id

                def build(src: str) -> tuple[Any, Any]:
                    return build_function(cp, src, options, name)

                def use_device() -> None:
                    cp.cuda.Device(device_id).use()

                initializer: Callable[[], None] | None = use_device
            else:
                initializer = None
            workers = default_workers() if compile_workers == "auto" else int(compile_workers)
            self.compiler = Compiler(build, workers, initializer)

    # --- the call --------------------------------------------------------------------------------------
    def __call__(self, *args: Any, shared_mem: int = 0) -> None:
        state = self._state(args)
        tuner = state.tuner
        self.calls += 1
        while True:
            param: tuple[int, ...] = tuner.param  # type: ignore[assignment]
            config = dict(zip(self.names, param, strict=True))
            if tuner.state != IDLE and not state.queued:
                self._compile_ahead(state, tuner.candidates)  # type: ignore[arg-type]
            if tuner.state != IDLE and param not in state.checked:
                why = self._check(state, config, args, shared_mem)
                if why:
                    tuner = self._reject(state, param, why)
                    continue
                state.checked.add(param)
            function, module = self._function(state, config)
            grid, block = self.spec.grid(config, state.problem), self.spec.block(config)
            self._set_constants(module, args)
            tuner.begin()
            try:
                function(grid, block, args, shared_mem=shared_mem)
            except Exception as exc:  # a launch the device refuses (resources): drop it while scanning
                if tuner.state == IDLE or param == self.default_param:
                    raise
                tuner = self._reject(state, param, f"launch failed: {type(exc).__name__}: {exc}")
                continue
            tuner.end()
            break
        if len(tuner.scans) > state.saved_scans:
            state.saved_scans = len(tuner.scans)
            last = tuner.scans[-1]
            if not last["restored"] and self.cache is not None:
                self.cache.put(
                    self.gpu_class,
                    self.identity,
                    state.key_text,
                    dict(zip(self.names, last["best"], strict=True)),
                    ms=last["best_ms"],
                    kernel=self.spec.kernel_name,
                )

    # --- what a user asks after ------------------------------------------------------------------------
    def config(self, *args: Any) -> Config:
        """The configuration the next call with these arguments launches."""
        param: tuple[int, ...] = self._state(args).tuner.param  # type: ignore[assignment]
        return dict(zip(self.names, param, strict=True))

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per key (its text): the tuner's counts (``Autotuner.stats``), the locked configuration, where the
        candidates came from, whether the cache answered, rejected candidates with reasons, verify's extra
        launches and the seconds calls waited on the compiler."""
        out = {}
        for state in self.keys.values():
            s = state.tuner.stats()
            param = s.pop("param")
            out[state.key_text] = {
                "config": None if param is None else dict(zip(self.names, param, strict=True)),
                **s,
                "locked_at_launch": state.tuner.scans[0]["step"] if state.tuner.scans else None,
                "seed": state.seed,
                "cache": state.cache,
                "rejected": list(state.rejected),
                "verify_launches": state.verify_launches,
                "compile_wait_s": round(state.compile_wait_s, 4),
                "problem_size": list(state.problem),
            }
        return out

    def clear_cache(self) -> int:
        """Forget this kernel's remembered picks (every key, every GPU class); how many were dropped."""
        return self.cache.clear(self.identity) if self.cache is not None else 0

    def write_log(self, path: str | Path) -> Path:
        """One row per timed launch (``log=True``): key, launch, tuner state, parameters, milliseconds."""
        if self.log is None:
            raise AutotuneError(f"{WHERE}: write_log needs autotune(..., log=True)")
        return self.log.write_csv(path)

    def close(self) -> None:
        if self.compiler is not None:
            self.compiler.close()

    # --- keys ------------------------------------------------------------------------------------------
    def _state(self, args: Sequence[Any]) -> KeyState:
        problem = self._problem(args)
        k = self._key(*args) if self._key is not None else (problem, _shapes(args))
        try:
            state = self.keys.get(k)
        except TypeError:
            raise AutotuneError(
                f"{WHERE}: key returned {type(k).__name__} {k!r}, which is not hashable"
            ) from None
        if state is None:
            state = self.keys[k] = self._new_state(k, problem)
        return state

    def _problem(self, args: Sequence[Any]) -> tuple[int, int, int]:
        size: Any = self._problem_size
        if callable(size):
            size = size(*args)
        elif size is None:
            size = self._problem_from_arguments(args)
        try:
            return self.spec.problem(tuple(int(s) for s in size) if size is not None else None)
        except (SpecError, TypeError, ValueError) as exc:
            raise AutotuneError(f"{WHERE}: problem_size: {exc}") from None

    def _problem_from_arguments(self, args: Sequence[Any]) -> tuple[int, ...] | None:
        """The extents read off the first passed argument whose declared shape names them."""
        found: dict[str, int] = {}
        passed = [a for a in self.spec.arguments if a.argument]
        for arg, value in zip(passed, args, strict=False):
            shape = getattr(value, "shape", None)
            if arg.shape is None or shape is None or len(shape) != len(arg.shape):
                continue
            for expr, extent in zip(arg.shape, shape, strict=True):
                if expr.text.strip() in PROBLEM_NAMES:
                    found.setdefault(expr.text.strip(), int(extent))
        if not found:
            return None
        dims = [found.get(n, 1) for n in PROBLEM_NAMES]
        while len(dims) > 1 and dims[-1] == 1 and PROBLEM_NAMES[len(dims) - 1] not in found:
            dims.pop()
        return tuple(dims)

    def _new_state(self, k: Hashable, problem: tuple[int, int, int]) -> KeyState:
        space = self.spec.space(problem)
        text = repr(k)
        seeds: list[dict[str, int]] = []
        seed_line = "none: no table"
        if self.table is not None:
            seeds, seed_line = seed_configs(self.table, self.gpu_class, problem, self.names, 10**6)
            seeds = [c for c in seeds if space.is_valid(c)][: self.seed_count]
            if not seeds and not seed_line.startswith("none"):
                seed_line = f"none: no configuration of {seed_line} is valid here"
        if seeds:
            configs = seeds
        else:
            drawn = list(space.grid()) if self.scan is None else space.sample(self.scan, self.seed)
            configs = [space.default] + [c for c in drawn if c != space.default][: (self.scan or 10**9) - 1]
            seed_line = f"{seed_line}; scanning {len(configs)} configurations from scratch"
        candidates = [tuple(int(c[n]) for n in self.names) for c in configs]
        hit = None
        if self.cache is not None:
            stored = self.cache.get(self.gpu_class, self.identity, text)
            if stored is not None and sorted(stored["config"]) == sorted(self.names):
                if space.is_valid(stored["config"]):
                    hit = tuple(int(stored["config"][n]) for n in self.names)
        tuner = self._tuner(text, [hit, *candidates] if hit else candidates)
        state = KeyState(k, text, problem, tuner, seed_line, "off" if self.cache is None else "miss")
        if hit is not None:
            tuner.lock(hit)
            state.cache, state.saved_scans = "hit", len(tuner.scans)
            state.checked.add(hit)
            self._compile_ahead(state, [hit])
        else:
            self._compile_ahead(state, candidates)
        return state

    def _tuner(self, name: str, candidates: list[tuple[int, ...]]) -> Autotuner:
        return Autotuner(
            f"{self.spec.kernel_name}{name}",
            candidates,
            clock=self.clock,
            wallclock=self._wallclock,
            step=lambda: self.calls,
            log=self.log,
            **self.tuner_options,
        )

    def _reject(self, state: KeyState, param: tuple[int, ...], why: str) -> Autotuner:
        """Drop ``param`` (``why`` kept for the statistics); with nothing left, the default, locked."""
        state.rejected.append({"config": dict(zip(self.names, param, strict=True)), "reason": why})
        state.checked.discard(param)
        tuner = state.tuner
        if len(tuner.candidates) > 1:
            tuner.reject()
            return tuner
        if param == self.default_param:
            raise AutotuneError(f"{WHERE}: the default configuration {self.spec.default} cannot run: {why}")
        state.tuner = self._tuner(state.key_text, [self.default_param])
        state.tuner.lock(self.default_param)
        state.saved_scans = len(state.tuner.scans)
        return state.tuner

    # --- compiling and checking ------------------------------------------------------------------------
    def _source(self, config: Config, problem: tuple[int, int, int]) -> tuple[str, str]:
        defines = self.spec.defines(config, problem)
        options = self.spec.compiler_options
        return cache_key(self.spec.code, defines, options), source_with_defines(self.spec.code, defines)

    def _compile_ahead(self, state: KeyState, params: Sequence[tuple[int, ...]]) -> None:
        state.queued = True
        if self.compiler is None:
            return
        configs = [dict(zip(self.names, p, strict=True)) for p in params]
        if self.verify:
            configs.insert(0, dict(self.spec.default))
        items = []
        for config in configs:
            try:
                items.append(self._source(config, state.problem))
            except ExpressionError:
                continue  # its grid cannot be computed here: the check says so when it comes to it
        self.compiler.ahead(items)

    def _function(self, state: KeyState, config: Config) -> tuple[Any, Any]:
        """(function, module) to launch ``config``: the kernel itself, or its compiled source (waiting for
        the compiler here, before the launch's events, if it is not done)."""
        if self.compiler is None:
            return self.kernel, None
        start = time.perf_counter()
        compiled, _ = self.compiler.get(*self._source(config, state.problem))
        state.compile_wait_s += time.perf_counter() - start
        if not compiled.ok:
            raise AutotuneError(f"{WHERE}: {config} does not compile: {compiled.error}")
        return compiled.function, compiled.module

    def _check(self, state: KeyState, config: Config, args: Sequence[Any], shared_mem: int) -> str:
        """Why ``config`` cannot be used for this key ('' when it can): its grid, its compile, the compiled
        kernel's limits, and with ``verify`` its outputs against the default's."""
        try:
            grid, block = self.spec.grid(config, state.problem), self.spec.block(config)
        except ExpressionError as exc:
            return str(exc)
        if self.compiler is not None:
            start = time.perf_counter()
            compiled, _ = self.compiler.get(*self._source(config, state.problem))
            state.compile_wait_s += time.perf_counter() - start
            if not compiled.ok:
                return f"compile error: {compiled.error}"
            function = compiled.function
        else:
            function = self.kernel
        threads = math.prod(block)
        limit = getattr(function, "max_threads_per_block", None)
        if isinstance(limit, int) and threads > limit:
            return f"block of {threads} threads over the compiled kernel's limit of {limit}"
        if min(block) < 1 or min(grid) < 1:
            return f"grid {grid} or block {block} has an empty dimension"
        if not self.verify or tuple(config[n] for n in self.names) == self.default_param:
            return ""
        return self._verify(state, config, args, shared_mem)

    def _verify(self, state: KeyState, config: Config, args: Sequence[Any], shared_mem: int) -> str:
        """Launch the default then ``config`` from the same state (``restore`` saved, restored between and
        after) and compare every array argument; the first difference over the tolerance, named."""
        arrays = [i for i, a in enumerate(args) if getattr(a, "ndim", 0) > 0]
        saved = {i: args[i].copy() for i in self.restore}
        default = dict(self.spec.default)
        fn, module = self._function(state, default)
        self._set_constants(module, args)
        fn(self.spec.grid(default, state.problem), self.spec.block(default), args, shared_mem=shared_mem)
        expected = {i: args[i].copy() for i in arrays}
        self._put_back(args, saved)
        fn, module = self._function(state, config)
        self._set_constants(module, args)
        fn(self.spec.grid(config, state.problem), self.spec.block(config), args, shared_mem=shared_mem)
        state.verify_launches += 2
        why = ""
        for i in arrays:
            why = _difference(args[i], expected[i], self.atol, self.rtol, self._arg_name(i))
            if why:
                break
        self._put_back(args, saved)
        return why

    @staticmethod
    def _put_back(args: Sequence[Any], saved: Mapping[int, Any]) -> None:
        for i, copy in saved.items():
            args[i][...] = copy

    def _arg_name(self, index: int) -> str:
        passed = [a.name for a in self.spec.arguments if a.argument]
        return passed[index] if index < len(passed) else f"argument {index}"

    def _set_constants(self, module: Any, args: Sequence[Any]) -> None:
        if module is None or not self.constants:
            return
        for symbol, index in self.constants.items():
            view = self._views.get((id(module), symbol))
            if view is None:
                try:
                    pointer = module.get_global(symbol)
                except Exception:  # noqa: BLE001  (this configuration's source does not declare it: #if)
                    continue
                array = args[index]
                view = self._views[(id(module), symbol)] = self._cp.ndarray(array.shape, array.dtype, pointer)
            view[...] = args[index]


# --- helpers --------------------------------------------------------------------------------------------
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
        path = Path(text)
        if not path.is_file():
            raise AutotuneError(f"{WHERE}: source: no such file {path}")
        return path.read_text(encoding="utf-8"), str(path)
    if isinstance(source, Path):
        return source.read_text(encoding="utf-8"), str(source)
    return text, "<source>"


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
    if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
        return item
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


def _shapes(args: Sequence[Any]) -> tuple[tuple[tuple[int, ...], str], ...]:
    return tuple((tuple(a.shape), str(a.dtype)) for a in args if getattr(a, "ndim", 0) > 0)


def _difference(actual: Any, expected: Any, atol: float, rtol: float, name: str) -> str:
    """'' where ``actual`` matches ``expected`` within ``atol + rtol * |expected|`` everywhere (NaN where
    the default has NaN), else the worst element, named."""
    xp = _module_of(actual)
    if actual.shape != expected.shape:
        return f"{name}: shape {actual.shape}, the default's {expected.shape}"
    if actual.dtype.kind not in "fc":
        bad = actual != expected
    else:
        excess = xp.abs(actual - expected) - (atol + rtol * xp.abs(expected))
        bad = (excess > 0) | (xp.isnan(actual) != xp.isnan(expected))
    count = int(bad.sum())
    if not count:
        return ""
    where = np.unravel_index(int(xp.argmax(bad)), actual.shape)
    a, e = actual[where].item(), expected[where].item()
    at = ",".join(map(str, where))
    return (
        f"{name}[{at}] = {a:.7g}, the default gives {e:.7g} (atol {atol:g} + rtol {rtol:g}); "
        f"{count} elements differ"
    )


def _module_of(array: Any) -> Any:
    if type(array).__module__.startswith("cupy"):
        import cupy

        return cupy
    return np
