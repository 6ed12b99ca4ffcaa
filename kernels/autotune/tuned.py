"""A tuned kernel: each call launches the wrapped kernel once, in the configuration its key's
:class:`~launchtune.kernels.autotune.tuning.Tuning` says (candidates, cache, rejections, the state machine:
the same object the CFD solver's tuners are); ``autotune(...)`` (``user.py``) checks the arguments and builds
one. Candidates compile ahead on a thread pool; ``verify`` and ``restore`` guard the
answer while tuning.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..kernel.compile import (
    Compiler,
    build_function,
    cache_key,
    default_workers,
    source_with_defines,
)
from ..kernel.errors import SpecError
from ..kernel.expressions import ExpressionError
from ..kernel.spec import PROBLEM_NAMES, KernelSpec
from .cache import PickCache
from .log import LaunchLog
from .tuner import IDLE, TunerError
from .tuning import Tuning

WHERE = "autotune"
Config = dict[str, int]


class AutotuneError(TunerError):
    """An ``autotune(...)`` call that cannot work; the message names the argument and what is wrong."""


@dataclass
class KeyState:
    """One key's tuning (its problem size, its :class:`Tuning`) and what the kernel did for it."""

    key: Hashable
    key_text: str
    problem: tuple[int, int, int]
    tuning: Tuning
    checked: set[tuple[int, ...]] = field(default_factory=set)
    verify_launches: int = 0
    compile_wait_s: float = 0.0
    queued: bool = False


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
            from ..backend import get_backend
            from ..device import describe_device

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
        tuning = state.tuning
        self.calls += 1
        while True:
            param, config = tuning.param, tuning.config
            if tuning.state != IDLE and not state.queued:
                self._compile_ahead(state, tuning.candidates)
            if tuning.state != IDLE and param not in state.checked:
                why = self._check(state, config, args, shared_mem)
                if why:
                    self._reject(state, why)
                    continue
                state.checked.add(param)
            function, module = self._function(state, config)
            grid, block = self.spec.grid(config, state.problem), self.spec.block(config)
            self._set_constants(module, args)
            tuning.begin()
            try:
                function(grid, block, args, shared_mem=shared_mem)
            except Exception as exc:  # a launch the device refuses (resources): drop it while scanning
                if tuning.state == IDLE or param == self.default_param:
                    raise
                self._reject(state, f"launch failed: {type(exc).__name__}: {exc}")
                continue
            tuning.end()  # a finished scan's pick goes to the cache there
            break

    # --- what a user asks after ------------------------------------------------------------------------
    def config(self, *args: Any) -> Config:
        """The configuration the next call with these arguments launches."""
        return self._state(args).tuning.config

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per key (its text): the tuning's counts (``Tuning.stats``: the locked configuration, where the
        candidates came from, whether the cache answered, rejected candidates with reasons), the launch it
        locked at, verify's extra launches and the seconds calls waited on the compiler."""
        out = {}
        for state in self.keys.values():
            scans = state.tuning.tuner.scans
            out[state.key_text] = {
                **state.tuning.stats(),
                "locked_at_launch": scans[0]["step"] if scans else None,
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
        tuning = Tuning(
            f"{self.spec.kernel_name}{k!r}",
            self.spec.space(problem),
            gpu_class=self.gpu_class,
            size=problem,
            table=self.table,
            seed_count=self.seed_count,
            scan=self.scan,
            seed=self.seed,
            cache=self.cache,
            identity=self.identity,
            key_text=repr(k),
            info={"kernel_name": self.spec.kernel_name},
            clock=self.clock,
            wallclock=self._wallclock,
            step=lambda: self.calls,
            log=self.log,
            **self.tuner_options,
        )
        state = KeyState(k, repr(k), problem, tuning)
        if tuning.state == IDLE:  # a remembered pick
            state.checked.add(tuning.param)
            self._compile_ahead(state, [tuning.param])
        else:
            self._compile_ahead(state, tuning.candidates)
        return state

    def _reject(self, state: KeyState, why: str) -> None:
        """Drop the tuning's configuration (``why`` kept for the statistics); with nothing left, the default,
        locked."""
        state.checked.discard(state.tuning.param)
        try:
            state.tuning.reject(why)
        except TunerError as exc:
            raise AutotuneError(f"{WHERE}: {exc}") from None

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
