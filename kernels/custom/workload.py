"""The ``kernel`` workload: a user's CUDA kernel, described by a kernel spec (``kernels.custom.spec``), as the
pipeline sees every workload: ``space()``, ``run()``, ``check()``, ``describe()``.

``options`` of a sweep: ``spec`` (the kernel spec's path; a sweep resolves it relative to the sweep file),
``seed`` (the arguments' fill, default 0) and ``compile_workers`` (threads compiling ahead; ``auto``, the
default, is this process's cores less one; 0 compiles each configuration when it is needed;
``$LAUNCHTUNE_COMPILE_WORKERS`` sets it where the option is absent).

It runs CUDA only: on the numpy backend (no GPU) it refuses to be built, with one line. A ``reference``
function in the spec answers the check instead of the default configuration, but there is nothing to tune
on a CPU, so it does not make the workload run there.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np

from launchtune.kernels.backend import get_backend
from launchtune.kernels.custom.arguments import make_host
from launchtune.kernels.custom.compile import (
    Compiled,
    Compiler,
    cache_key,
    default_workers,
    source_with_defines,
)
from launchtune.kernels.custom.errors import SpecError
from launchtune.kernels.custom.expressions import ExpressionError
from launchtune.kernels.custom.spec import KernelSpec, check_for_problem, load_kernel_spec
from launchtune.kernels.device import CLASS_SPECS
from launchtune.kernels.space import Space
from launchtune.kernels.workload import Check, Timing, Workload, WorkloadError

OPTIONS = ("spec", "seed", "compile_workers")
WORKERS_ENV = "LAUNCHTUNE_COMPILE_WORKERS"
WARMUP_LAUNCHES = 1
# CUDA's limits on a launch's shape, the same on every card since compute capability 3.0
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2**31 - 1, 65535, 65535)


def _spec_path(options: Mapping[str, Any]) -> Path:
    path = options.get("spec")
    if not isinstance(path, str | Path) or not str(path).strip():
        raise WorkloadError(
            "the kernel workload needs options.spec: the kernel spec's YAML", field="options.spec"
        )
    return Path(path)


def _workers(value: Any, where: str = "options.compile_workers") -> int:
    if value is None:
        value = os.environ.get(WORKERS_ENV, "auto")
        where = f"${WORKERS_ENV}"
    if value == "auto":
        return default_workers()
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 256:
        raise WorkloadError(f"expected 'auto' or a number of threads 0-256, got {value!r}", field=where)
    return value


def _import(target: str, where: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        return reduce(getattr, attr.split("."), importlib.import_module(module_name))
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"{where}: cannot import {target!r} ({exc})") from None


def largest_memory_bytes() -> float:
    """The most memory any GPU class of the registry has: arrays larger than it fit no card we know."""
    return max(s.memory_gb for s in CLASS_SPECS.values()) * 1e9


def _check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise WorkloadError(f"unknown option {unknown[0]!r} (options: {', '.join(OPTIONS)})", field="options")
    seed = options.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise WorkloadError(f"expected an integer >= 0, got {seed!r}", field="options.seed")
    _workers(options.get("compile_workers"))


def check_arguments(case: str, size: str | Sequence[int], **options: Any) -> None:
    """A sweep's kernel workload checked before any cluster starts (``kernels.workload.check_arguments``):
    the options, the whole kernel spec, its default configuration at this size, and arrays that fit the
    largest GPU of the registry (the card's own memory is checked where the workload is built)."""
    _check_options(options)
    spec = load_kernel_spec(_spec_path(options))
    check_for_problem(spec, spec.problem(size), largest_memory_bytes(), "any GPU class of the registry,")


def code_references(**options: Any) -> list[tuple[str, str]]:
    """(field, module:function) of the Python the kernel spec names (its reference, its arguments
    factory): a sweep allows these as it allows a ``module:factory`` workload."""
    return load_kernel_spec(_spec_path(options)).code_references()


class KernelWorkload(Workload):
    gpu_only = True  # compiles and runs CUDA: no numpy backend
    path_options = ("spec",)
    from_kernel_spec = True

    @classmethod
    def check_arguments(cls, case: str, size: Any, **options: Any) -> None:
        check_arguments(case, size, **options)

    @classmethod
    def code_references(cls, **options: Any) -> list[tuple[str, str]]:
        return code_references(**options)

    name = "kernel"

    def __init__(
        self,
        case: str,
        size: str | Sequence[int] | None,
        backend: str = "auto",
        spec: str | Path | None = None,
        seed: int = 0,
        compile_workers: int | str | None = None,
    ):
        self.spec: KernelSpec = load_kernel_spec(_spec_path({"spec": spec}))
        self.case = case
        self.problem = self.spec.problem(size)
        self.size = self.problem
        self.seed = seed
        self.backend = get_backend(backend)
        if not self.backend.is_gpu:
            raise WorkloadError(
                "the kernel workload compiles and runs CUDA, and the backend is numpy (no GPU visible): run "
                "it where a GPU is",
                field="backend",
            )
        cp = self.cp = self.backend.xp
        device = cp.cuda.Device()
        self.device_id = device.id
        attrs = device.attributes
        # static shared memory (what __shared__ arrays declare) is bounded by the plain per-block limit
        self.max_shared = int(attrs.get("MaxSharedMemoryPerBlock", 49152))
        check_for_problem(self.spec, self.problem, float(device.mem_info[1]))
        self._space = self.spec.space(self.problem)
        self._host, self._args, self._constants, self._outputs = self._make_arguments()
        self._initial = {i: cp.asarray(self._host[i]) for i in self._outputs}
        self.compiler = Compiler(self._build, _workers(compile_workers), self._use_device)
        self._reference: dict[int, Any] | None = None
        self._constants_set: set[str] = set()
        self._compile_ms = 0.0  # compile time of the configurations used since take_compile_ms
        self.build_compile_ms = 0.0

    # -- arguments ---------------------------------------------------------------------------------------

    def _make_arguments(self) -> tuple[list[Any], list[Any], dict[str, Any], list[int]]:
        """Host values, device arguments in kernel order, constant-memory arrays and the indices (in the
        host list) of the outputs."""
        cp = self.cp
        if self.spec.arguments_factory:
            made = _import(self.spec.arguments_factory, f"{self.spec.path}: arguments_factory")(
                self.problem, self.seed
            )
            if isinstance(made, Mapping):
                host = list(made["arguments"])
                outputs = [int(i) for i in made.get("outputs", [])]
                constants_host = dict(made.get("constants", {}))
            else:
                host, constants_host = list(made), {}
                outputs = [i for i, v in enumerate(host) if isinstance(v, np.ndarray)]
            device = [cp.asarray(v) if isinstance(v, np.ndarray) else v for v in host]
            return host, device, {k: cp.asarray(v) for k, v in constants_host.items()}, outputs
        values = self.spec.values(self.problem)
        host, device, constants, outputs = [], [], {}, []
        for index, arg in enumerate(self.spec.arguments):
            value = make_host(arg, index, values, self.seed)
            on_device = value if arg.is_scalar else cp.asarray(value)
            if arg.constant:
                constants[arg.constant] = on_device
            if arg.argument:
                if arg.output:
                    outputs.append(len(host))
                host.append(value)
                device.append(on_device)
        return host, device, constants, outputs

    # -- compiling ---------------------------------------------------------------------------------------

    def _use_device(self) -> None:
        self.cp.cuda.Device(self.device_id).use()  # a pool thread compiles and loads on this workload's GPU

    def _build(self, source: str) -> tuple[Any, Any]:
        module = self.cp.RawModule(
            code=source, options=self.spec.compiler_options, name_expressions=[self.spec.kernel_name]
        )
        function = module.get_function(self.spec.kernel_name)
        function.max_threads_per_block  # noqa: B018  (loads the module here, on the compiling thread)
        return module, function

    def _source(self, config: Mapping[str, int]) -> tuple[str, str]:
        defines = self.spec.defines(config, self.problem)
        return cache_key(self.spec.code, defines, self.spec.compiler_options), source_with_defines(
            self.spec.code, defines
        )

    def compile_ahead(self, configs: Sequence[Mapping[str, int]]) -> int:
        """Queue ``configs`` (a batch about to be measured) on the compile pool; how many were new."""
        items = []
        if self._reference is None and not self.spec.reference:
            configs = [self._space.default, *configs]  # the first check needs the default's outputs first
        for config in configs:
            try:
                if self._space.is_valid(config):
                    items.append(self._source({n: int(config[n]) for n in self._space.names}))
            except ExpressionError:
                continue  # its grid cannot be computed: the check says so when it gets there
        return self.compiler.ahead(items)

    def compiled(self, config: Mapping[str, int], count: bool = True) -> Compiled:
        key, source = self._source(config)
        compiled, first = self.compiler.get(key, source)
        if first:
            if count:
                self._compile_ms += compiled.compile_ms
            else:
                self.build_compile_ms += compiled.compile_ms
        if compiled.ok and key not in self._constants_set:
            for symbol, array in self._constants.items():
                try:
                    pointer = compiled.module.get_global(symbol)
                except Exception:  # noqa: BLE001  (this configuration's source does not declare it: #if)
                    continue
                self.cp.ndarray(array.shape, array.dtype, pointer)[...] = array
            self._constants_set.add(key)
        return compiled

    def take_compile_ms(self) -> float:
        """Milliseconds compiling the configurations used since the last call (each module counted once,
        by the row that first used it; compiled ahead, this overlapped the GPU's work)."""
        ms, self._compile_ms = self._compile_ms, 0.0
        return ms

    # -- launching ---------------------------------------------------------------------------------------

    def geometry(self, config: Mapping[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        return self.spec.grid(config, self.problem), self.spec.block(config)

    def _problems(self, config: Mapping[str, int], compiled: Compiled) -> list[str]:
        """Why this configuration cannot launch on this device (empty when it can)."""
        if not compiled.ok:
            return [f"compile error: {compiled.error}"]
        try:
            grid, block = self.geometry(config)
        except ExpressionError as exc:
            return [str(exc)]
        problems = []
        threads = block[0] * block[1] * block[2]
        limit = int(compiled.function.max_threads_per_block)
        if threads > limit:
            problems.append(
                f"block of {threads} threads over the compiled kernel's limit of {limit} "
                f"({compiled.function.num_regs} registers per thread)"
            )
        if any(b > m for b, m in zip(block, MAX_BLOCK, strict=True)) or min(block) < 1:
            problems.append(f"block {block} outside CUDA's limits {MAX_BLOCK}")
        if any(g > m for g, m in zip(grid, MAX_GRID, strict=True)) or min(grid) < 1:
            problems.append(f"grid {grid} outside CUDA's limits {MAX_GRID}")
        shared = int(compiled.function.shared_size_bytes)
        if shared > self.max_shared:
            problems.append(
                f"{shared:,} bytes of shared memory over the device's {self.max_shared:,} per block"
            )
        return problems

    def _launch(self, compiled: Compiled, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
        compiled.function(grid, block, tuple(self._args))

    def _reset_outputs(self) -> None:
        for i, initial in self._initial.items():
            self._args[i][...] = initial

    def _outputs_after_one_launch(self, config: Mapping[str, int], compiled: Compiled) -> dict[int, Any]:
        self._reset_outputs()
        grid, block = self.geometry(config)
        self._launch(compiled, grid, block)
        self.cp.cuda.Device().synchronize()
        return {i: self._args[i].copy() for i in self._outputs}

    def reference_outputs(self) -> dict[int, Any]:
        """What every configuration must compute: the spec's ``reference`` function's answer, else the
        default configuration's outputs (computed once)."""
        if self._reference is not None:
            return self._reference
        if self.spec.reference:
            answer = _import(self.spec.reference, f"{self.spec.path}: reference")(
                list(self._host), self.problem
            )
            self._reference = {
                i: self.cp.asarray(answer[i])
                for i in self._outputs
                if i < len(answer) and answer[i] is not None
            }
            return self._reference
        default = self._space.default
        compiled = self.compiled(default, count=False)
        problems = self._problems(default, compiled)
        if problems:
            raise WorkloadError(
                f"the default configuration cannot run: {'; '.join(problems)}", field="default"
            )
        self._reference = self._outputs_after_one_launch(default, compiled)
        return self._reference

    # -- the workload interface --------------------------------------------------------------------------

    def space(self) -> Space:
        return self._space

    def check(self, config: Mapping[str, int]) -> Check:
        """The configuration compiles, fits the compiled kernel's and the device's limits, and computes the
        reference's outputs within ``atol + rtol * |reference|`` everywhere (the worst difference named)."""
        config = self._space.validate(config)
        want = self.reference_outputs()
        try:
            self.geometry(config)
        except ExpressionError as exc:  # a grid divisor that is not a positive whole number here
            return Check(False, str(exc))
        compiled = self.compiled(config)
        problems = self._problems(config, compiled)
        if problems:
            return Check(False, "; ".join(problems))
        got = self._outputs_after_one_launch(config, compiled)
        cp = self.cp
        for i, expected in want.items():
            actual = got[i]
            excess = cp.abs(actual - expected) - (self.spec.atol + self.spec.rtol * cp.abs(expected))
            bad = ~cp.isfinite(actual) | (excess > 0)
            if bool(bad.any()):
                where = int(cp.argmax(cp.where(bad, cp.nan_to_num(excess, nan=np.inf), -np.inf)))
                index = np.unravel_index(where, actual.shape)
                a, e = float(actual[index]), float(expected[index])
                name = self._argument_name(i)
                at = ",".join(map(str, index))
                tolerance = f"atol {self.spec.atol:g} + rtol {self.spec.rtol:g}"
                return Check(
                    False,
                    f"{name}[{at}] = {a:.7g}, expected {e:.7g} (difference {abs(a - e):.3g} over "
                    f"{tolerance}); {int(bad.sum())} elements differ",
                )
        return Check(True)

    def _argument_name(self, host_index: int) -> str:
        passed = [a.name for a in self.spec.arguments if a.argument]
        return passed[host_index] if host_index < len(passed) else f"argument {host_index}"

    def run(self, config: Mapping[str, int], repeats: int = 7) -> Timing:
        """CUDA events around each of ``repeats`` launches after a warm-up launch; the median. Compiling
        happens before the first event, never inside a measured interval."""
        if repeats < 1:
            raise ValueError("repeats must be >= 1")
        config = self._space.validate(config)
        compiled = self.compiled(config)
        problems = self._problems(config, compiled)
        if problems:
            raise WorkloadError("; ".join(problems), field="config")
        grid, block = self.geometry(config)
        cp = self.cp
        for _ in range(WARMUP_LAUNCHES):
            self._launch(compiled, grid, block)
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(repeats)]
        for start, stop in events:
            start.record()
            self._launch(compiled, grid, block)
            stop.record()
        events[-1][1].synchronize()
        times = [cp.cuda.get_elapsed_time(start, stop) for start, stop in events]
        median = float(np.median(times))
        return Timing(
            kernels={self.spec.kernel_name: median},
            total=median,
            repeats=repeats,
            extra={
                "compile_ms": self.take_compile_ms(),
                "grid": list(grid),
                "block": list(block),
                "unit": "ms per launch",
            },
        )

    def kernel_tuner_arguments(self) -> dict[str, Any]:
        """Keyword arguments of Kernel Tuner's ``tune_kernel`` that tune this kernel as this workload does:
        the same source, problem size, host arguments, constant memory, parameters, grid divisors (as
        functions of a configuration, so expressions over the problem size work too), block size names,
        compiler options, and the outputs every configuration must compute (``answer``, with ``atol``: the
        spec's ``reference`` or the default configuration's outputs). The restrictions are this workload's
        ``space()`` (the caller states them in Kernel Tuner's terms)."""
        expected = self.reference_outputs()

        def divisor(dim: int) -> Any:
            def div(params: Mapping[str, Any]) -> int:  # the divisor of KernelSpec.grid
                config = {n: int(params[n]) for n in self.spec.names}
                divs = self.spec.grid_div[dim]
                if divs is None:
                    return int(config.get(self.spec.block_size_names[dim], 1))
                product, values = 1, self.spec.values(self.problem, config)
                for d in divs:
                    product *= d.integer(values)
                return product

            return div

        return {
            "kernel_name": self.spec.kernel_name,
            "kernel_source": self.spec.code,
            "problem_size": tuple(self.problem),
            "arguments": list(self._host),
            "cmem_args": {k: v.get() for k, v in self._constants.items()} or None,
            "tune_params": {p.name: [int(v) for v in p.values] for p in self.spec.params},
            "grid_div_x": divisor(0),
            "grid_div_y": divisor(1),
            "grid_div_z": divisor(2),
            "block_size_names": list(self.spec.block_size_names),
            "compiler_options": list(self.spec.compiler_options),
            "answer": [expected[i].get() if i in expected else None for i in range(len(self._host))],
            "atol": self.spec.atol,
            "lang": "cupy",
        }

    def describe(self) -> dict[str, Any]:
        return {
            "workload": self.name,
            "case": self.case,
            "kernels": [self.spec.kernel_name],
            "spec": str(self.spec.path),
            "source": str(self.spec.source),
            "problem_size": list(self.problem),
            "backend": self.backend.name,
            "compile_workers": self.compiler.workers,
        }


def make_workload(
    case: str, size: str | Sequence[int] | None, backend: str = "auto", **options: Any
) -> KernelWorkload:
    """``make_workload("convolution", "4096x4096", spec="kernels/examples/convolution.yaml")``; ``size``
    None takes the spec's ``problem_size``."""
    _check_options(options)
    return KernelWorkload(case, size, backend, **options)
