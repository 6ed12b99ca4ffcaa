"""The ``kernel`` workload: a user's CUDA kernel, described by a kernel spec (``kernels.kernel.spec``), as the
pipeline sees every workload: ``space()``, ``run()``, ``check()``, ``describe()``.

``options`` of a sweep: ``spec`` (the kernel spec's path; a sweep resolves it relative to the sweep file),
``seed`` (the arguments' fill, default 0) and ``compile_workers`` (threads compiling ahead; ``auto``, the
default, is this process's cores less one; 0 compiles each configuration when it is needed;
``$LAUNCHTUNE_COMPILE_WORKERS`` sets it where the option is absent) and ``energy`` (``auto``, the default:
measure energy and power, ``kernels.energy``, where the spec's objective or a metric reads them; ``true``:
for every configuration; ``false``: never).

What a configuration is worth is the spec's objective (``kernels.objective``): ``run`` reports the time as
the total, and in ``extra`` the objective's cost (``objective``, lower is better), each metric (``metrics``)
and, where measured, ``energy_mJ`` and ``power_W``.

It runs CUDA only: on the numpy backend (no GPU) it refuses to be built, with one line. A ``reference``
function in the spec answers the check instead of the default configuration, but there is nothing to tune
on a CPU, so it does not make the workload run there.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..backend import get_backend
from ..space import Space
from ..workload import Capabilities, Check, Timing, Workload, WorkloadError
from . import live
from .arguments import make_host
from .compile import (
    Compiled,
    Compiler,
    build_function,
    cache_key,
    header_digest,
    source_with_defines,
)
from .errors import SpecError
from .expressions import ExpressionError
from .fields import GRID_NAMES, MAX_BLOCK
from .options import (
    check_arguments,
    check_options,
    checked_spec,
    energy_option,
    import_target,
    workers_option,
)
from .spec import KernelSpec, check_for_problem

WARMUP_LAUNCHES = 1
REFERENCES_KEPT = 4  # answers of a reference that takes the configuration, kept on the device
MAX_GRID = (2**31 - 1, 65535, 65535)


class KernelWorkload(Workload):
    name = "kernel"
    # compiles and runs CUDA (no numpy backend); ``spec`` names a kernel spec, pinned by ``options.pin`` and
    # naming Python that ``options.code_references`` lists for the sweep to allow
    capabilities = Capabilities(gpu_only=True, path_options=("spec",), kernel_spec=True)

    @classmethod
    def check_arguments(cls, case: str, size: Any, **options: Any) -> None:
        check_arguments(case, size, **options)

    def __init__(
        self,
        case: str,
        size: str | Sequence[int] | None,
        backend: str = "auto",
        spec: str | Path | None = None,
        seed: int = 0,
        compile_workers: int | str | None = None,
        spec_sha256: str | None = None,
        energy: bool | str = "auto",
    ):
        self.spec: KernelSpec = checked_spec({"spec": spec, "spec_sha256": spec_sha256})
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
        # static and dynamic shared memory together may reach the opt-in limit (the kernel asks for it)
        self.max_shared_optin = int(attrs.get("MaxSharedMemoryPerBlockOptin", self.max_shared))
        self._headers = header_digest(self.spec)  # an edited header is another module
        check_for_problem(self.spec, self.problem, float(device.mem_info[1]))
        self._space = self.spec.space(self.problem)
        self._live_key = live.key(self.spec.path)  # what the caller attached, looked up where it is used
        attached = live.attached_to(self._live_key)
        self._given = dict(attached.arrays) if attached is not None else {}
        self._host, self._args, self._constants, self._outputs = self._make_arguments()
        self._initial = {  # a caller's device array is restored from a copy on the device, never the host
            i: self._args[i].copy() if i in self._given else cp.asarray(self._host[i]) for i in self._outputs
        }
        self.compiler = Compiler(self._build, workers_option(compile_workers), self._use_device)
        self._reference: dict[int, Any] | None = None
        self._references: dict[tuple, dict[int, Any]] = {}  # the reference function's answers, recent last
        self._constants_set: set[str] = set()
        self._compile_ms = 0.0  # compile time of the configurations used since take_compile_ms
        self.build_compile_ms = 0.0
        self.energy_reason = ""  # why energy is wanted and not measured
        self._meter: Any = None
        wanted = energy_option(energy)
        if wanted == "true" or (wanted == "auto" and self.spec.needs_energy):
            from ..energy import EnergyMeter

            meter = EnergyMeter(pci_bus_id=getattr(device, "pci_bus_id", None))
            if meter.available:
                self._meter = meter
            elif self.spec.needs_energy:
                raise WorkloadError(
                    f"{self.spec.path}: objective: {self.spec.objective.describe()} needs the energy "
                    f"counter, and this machine has none ({meter.reason})",
                    field="options.spec",
                )
            else:
                self.energy_reason = meter.reason

    # -- arguments ---------------------------------------------------------------------------------------

    def _make_arguments(self) -> tuple[list[Any], list[Any], dict[str, Any], list[int]]:
        """Host values, device arguments in kernel order, constant-memory arrays and the indices (in the
        host list) of the outputs."""
        cp = self.cp
        if self.spec.arguments_factory:
            made = import_target(self.spec.arguments_factory, f"{self.spec.path}: arguments_factory")(
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
            given = arg.argument and arg.fill is not None and arg.fill.kind == "caller"
            if given and len(host) in self._given:  # the caller's device array, used as it is
                value = on_device = self._given[len(host)]
            else:
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

    def _build(self, source: tuple[str, str]) -> tuple[Any, Any]:
        code, name = source  # a templated kernel's name differs between configurations
        return build_function(self.cp, code, self.spec.compiler_options, name)

    def _source(self, config: Mapping[str, int]) -> tuple[str, tuple[str, str]]:
        """The compile-cache key of ``config`` and what is compiled: the source text handed to the
        compiler and the kernel's name expression."""
        defines = self.spec.defines(config, self.problem)
        attached = live.attached_to(self._live_key)
        if attached is not None and attached.defines:  # the caller's functions, run here
            actual = self.spec.actual({n: config[n] for n in self.spec.names})
            for k, f in attached.defines.items():
                value = f(dict(actual))
                value = value.item() if isinstance(value, np.generic) else value
                defines[k] = value if isinstance(value, int | float | str) else str(value)
        if attached is not None and attached.grid is not None:  # the caller's geometry, computed here
            defines.update(zip(GRID_NAMES, attached.grid(self.spec.actual(dict(config))), strict=True))
        name = self.spec.name_expression(config)
        options = [*self.spec.compiler_options, name]
        key = cache_key(self.spec.code, defines, options, self._headers)
        return key, (source_with_defines(self.spec.code, defines, self._headers), name)

    def compile_ahead(self, configs: Sequence[Mapping[str, int]]) -> int:
        """Queue ``configs`` (a batch about to be measured) on the compile pool; how many were new."""
        items = []
        if (
            self._reference is None
            and not self.spec.reference
            and not any(a.answer for a in self.spec.arguments)
        ):
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
        attached = live.attached_to(self._live_key)
        if attached is not None and attached.grid is not None:  # Kernel Tuner's functions, the caller's
            return attached.grid(self.spec.actual(dict(config))), self.spec.block(config)
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
        try:
            dynamic = self.spec.shared_bytes(config, self.problem)
        except ExpressionError as exc:
            return problems + [str(exc)]
        if dynamic < 0:
            problems.append(f"shared_memory: {dynamic} bytes for this configuration (must be >= 0)")
        elif dynamic and shared + dynamic > self.max_shared_optin:
            problems.append(
                f"{shared:,} bytes of static and {dynamic:,} of dynamic shared memory over the device's "
                f"{self.max_shared_optin:,} per block"
            )
        elif not dynamic and shared > self.max_shared:
            problems.append(
                f"{shared:,} bytes of shared memory over the device's {self.max_shared:,} per block"
            )
        return problems

    def _launch(
        self, compiled: Compiled, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int = 0
    ) -> None:
        if shared:
            compiled.function(grid, block, tuple(self._args), shared_mem=shared)
        else:
            compiled.function(grid, block, tuple(self._args))

    def _shared(self, config: Mapping[str, int], compiled: Compiled) -> int:
        """The dynamic shared memory of ``config``'s launch; past the plain per-block limit, the kernel
        opts in to it first (as CUDA requires; ``_problems`` bounded it by the opt-in limit)."""
        dynamic = self.spec.shared_bytes(config, self.problem)
        function = compiled.function
        if dynamic + int(function.shared_size_bytes) > self.max_shared and (
            int(getattr(function, "max_dynamic_shared_size_bytes", 0)) < dynamic
        ):
            function.max_dynamic_shared_size_bytes = dynamic
        return dynamic

    def _reset_outputs(self) -> None:
        for i, initial in self._initial.items():
            self._args[i][...] = initial

    def _outputs_after_one_launch(self, config: Mapping[str, int], compiled: Compiled) -> dict[int, Any]:
        self._reset_outputs()
        grid, block = self.geometry(config)
        self._launch(compiled, grid, block, self._shared(config, compiled))
        self.cp.cuda.Device().synchronize()
        return {i: self._args[i].copy() for i in self._outputs}

    def _reference_function(self) -> tuple[Any, bool]:
        """The spec's ``reference`` function and whether it takes the configuration (a third parameter:
        where the answer depends on a parameter, such as the steps one launch of a stencil advances)."""
        function = import_target(self.spec.reference or "", f"{self.spec.path}: reference")
        try:
            takes = len(inspect.signature(function).parameters) >= 3
        except (TypeError, ValueError):
            takes = False
        return function, takes

    @property
    def reference_per_config(self) -> bool:
        return bool(self.spec.reference) and self._reference_function()[1]

    def reference_outputs(self, config: Mapping[str, int] | None = None) -> dict[int, Any]:
        """What every configuration must compute: the spec's ``reference`` function's answer (for
        ``config`` where the function takes one; the last few kept), else the default configuration's
        outputs (computed once), or the spec's ``answer`` arrays where it gives them."""
        if self.spec.reference:
            function, per_config = self._reference_function()
            key = tuple(sorted((config or self._space.default).items())) if per_config else ()
            if key in self._references:
                return self._references[key]
            args: list[Any] = [list(self._host), self.problem]
            if per_config:
                args.append(self.spec.actual(dict(config or self._space.default)))
            answer = function(*args)
            outputs = {
                i: self.cp.asarray(answer[i])
                for i in self._outputs
                if i < len(answer) and answer[i] is not None
            }
            if len(self._references) >= REFERENCES_KEPT:
                self._references.pop(next(iter(self._references)))
            self._references[key] = outputs
            self._reference = outputs
            return outputs
        if self._reference is not None:
            return self._reference
        answers = self._answers()  # the spec's answer arrays (the Python API's answer=)
        if answers:
            self._reference = {i: self.cp.asarray(a) for i, a in answers.items()}
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

    def _answers(self) -> dict[int, Any]:
        """The spec's ``answer`` arrays by host index (empty where none is given), each checked against its
        argument's shape and dtype."""
        out, index = {}, 0
        for arg in self.spec.arguments:
            if not arg.argument:
                continue
            if arg.answer is not None:
                data = np.load(arg.answer, allow_pickle=False)
                host = self._host[index]
                if data.shape != host.shape or data.dtype != host.dtype:
                    raise SpecError(
                        f"{arg.where}.answer: {arg.answer.name} holds {data.dtype}{list(data.shape)}, the "
                        f"argument is {host.dtype}{list(host.shape)}"
                    )
                out[index] = data
            index += 1
        return out

    def check_default(self) -> None:
        """The default configuration compiles, fits the device and launches, else ``SpecError``: one line
        naming the spec and the compiler's first error (or the launch's), for a sweep to stop at before any
        worker measures: every configuration of a spec whose default cannot compile (a missing header, a
        typo) would fail alike, and a folder of failed rows answers nothing."""
        default = self._space.default
        compiled = self.compiled(default, count=False)
        problems = self._problems(default, compiled)
        if not problems:
            try:
                self._outputs_after_one_launch(default, compiled)
            except Exception as exc:  # noqa: BLE001  (CuPy's launch errors have several types)
                problems = [f"launch failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"]
        if problems:
            raise SpecError(
                f"{self.spec.path}: the default configuration {default} cannot run: {problems[0]}"
            )

    # -- the workload interface --------------------------------------------------------------------------

    def space(self) -> Space:
        return self._space

    def check(self, config: Mapping[str, int]) -> Check:
        """The configuration compiles, fits the compiled kernel's and the device's limits, and computes the
        reference's outputs within ``atol + rtol * |reference|`` everywhere (the worst difference named)."""
        config = self._space.validate(config)
        attached = live.attached_to(self._live_key)
        check = self._check(config, attached.verify if attached is not None else None)
        if not check.ok and attached is not None and attached.measured is not None:
            attached.measured(self.spec.actual(dict(config)), {"error": check.reason})
        return check

    def _check(self, config: dict[str, int], verify: Callable[..., Any] | None) -> Check:
        want = self.reference_outputs(config) if verify is None else {}
        try:
            self.geometry(config)
        except ExpressionError as exc:  # a grid divisor that is not a positive whole number here
            return Check(False, str(exc))
        compiled = self.compiled(config)
        problems = self._problems(config, compiled)
        if problems:
            return Check(False, "; ".join(problems))
        got = self._outputs_after_one_launch(config, compiled)
        if verify is not None:
            return self._verified(config, verify)
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

    def _verified(self, config: Mapping[str, int], verify: Callable[..., Any]) -> Check:
        """Kernel Tuner's ``verify(answer, result_host, atol=)`` on every argument after one launch (arrays
        copied to the host), in this process: the caller's function (``kernels.kernel.live``)."""
        attached = live.attached_to(self._live_key)
        assert attached is not None
        answer = None if attached.answer is None else list(attached.answer)
        # as Kernel Tuner's: with an answer, the arrays it names come back; without, every array; else None
        wanted = [
            (answer[i] is not None)
            if answer
            else isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__")
            for i, a in enumerate(self._args)
        ]
        result_host = [self.cp.asnumpy(a) if w else None for a, w in zip(self._args, wanted, strict=True)]
        if bool(verify(answer, result_host, atol=attached.atol)):
            return Check(True)
        return Check(False, f"verify returned False for {self.spec.actual(dict(config))}")

    def _argument_name(self, host_index: int) -> str:
        passed = [a.name for a in self.spec.arguments if a.argument]
        return passed[host_index] if host_index < len(passed) else f"argument {host_index}"

    def launcher(self, config: Mapping[str, int], function: Any = None) -> Callable[[], None]:
        """One launch of ``config`` on this workload's arguments, compiled and ready (a timing protocol's
        building block: ``run`` and ``benchmarks/timing_parity.py``); a configuration that cannot launch here
        is a :class:`WorkloadError`. ``function``: the same kernel built another way (a comparison's),
        launched with this configuration's grid, block and shared memory."""
        config = self._space.validate(config)
        compiled = self.compiled(config)
        problems = self._problems(config, compiled)
        if problems:
            raise WorkloadError("; ".join(problems), field="config")
        grid, block = self.geometry(config)
        shared = self._shared(config, compiled)
        if function is not None:
            compiled = dataclasses.replace(compiled, function=function)
        return functools.partial(self._launch, compiled, grid, block, shared)

    def run(self, config: Mapping[str, int], repeats: int = 7) -> Timing:
        """CUDA events around each of ``repeats`` launches after a warm-up launch; the median. Compiling
        happens before the first event, never inside a measured interval."""
        if repeats < 1:
            raise ValueError("repeats must be >= 1")
        config = self._space.validate(config)
        launch = self.launcher(config)
        grid, block = self.geometry(config)
        cp = self.cp
        for _ in range(WARMUP_LAUNCHES):
            launch()
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(repeats)]
        for start, stop in events:
            start.record()
            launch()
            stop.record()
        events[-1][1].synchronize()
        times = [cp.cuda.get_elapsed_time(start, stop) for start, stop in events]
        median = float(np.median(times))
        measured: dict[str, float | None] = {"time": median}
        extra: dict[str, Any] = {}
        if self._meter is not None:

            def chunk(n: int) -> None:
                for _ in range(n):
                    launch()
                cp.cuda.Device().synchronize()

            energy = self._meter.measure(chunk, median)
            measured.update(energy_mJ=energy.energy_mJ, power_W=energy.power_W)
            extra.update(energy_mJ=energy.energy_mJ, power_W=energy.power_W, energy_launches=energy.launches)
        elif self.energy_reason:
            extra["energy_reason"] = self.energy_reason
        metrics, cost = self.spec.evaluate(config, self.problem, measured)
        compile_ms = self.take_compile_ms()
        attached = live.attached_to(self._live_key)
        if attached is not None and attached.measured is not None:
            attached.measured(
                self.spec.actual(dict(config)),
                {"time": median, "times": times, "compile_ms": compile_ms, "metrics": metrics,
                 "objective": cost, **extra},
            )  # fmt: skip
        return Timing(
            kernels={self.spec.kernel_base: median},
            total=median,
            repeats=repeats,
            extra={
                "compile_ms": compile_ms,
                "grid": list(grid),
                "block": list(block),
                "unit": "ms per launch",
                "objective": cost,
                "metrics": metrics,
                **extra,
            },
        )

    def measures(self) -> list[str]:
        """The columns a row of this workload adds to the time (``pipeline.sweep.schema``): each metric,
        and energy and power where they are measured (or wanted)."""
        out = [f"metric.{n}" for n in self.spec.metric_names]
        if self._meter is not None or self.energy_reason:
            out += ["energy_mJ", "power_W"]
        return out

    def kernel_tuner_arguments(self) -> dict[str, Any]:
        """Keyword arguments of Kernel Tuner's ``tune_kernel`` that tune this kernel as this workload does:
        the same source, problem size, host arguments, constant memory, parameters, grid divisors (as
        functions of a configuration, so expressions over the problem size work too), block size names,
        compiler options, and the outputs every configuration must compute (``answer``, with ``atol``: the
        spec's ``reference`` or the default configuration's outputs). The restrictions are this workload's
        ``space()`` (the caller states them in Kernel Tuner's terms)."""
        per_config = self.reference_per_config
        expected = {} if per_config else self.reference_outputs()

        def config_of(params: Mapping[str, Any]) -> dict[str, int]:  # Kernel Tuner's values -> the space's
            return {n: self.spec.index_of(n, params[n]) for n in self.spec.names}

        def shared_size(params: Mapping[str, Any]) -> int:
            return self.spec.shared_bytes(config_of(params), self.problem)

        def divisor(dim: int) -> Any:
            def div(params: Mapping[str, Any]) -> int:  # the divisor of KernelSpec.grid
                config = config_of(params)
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
            # a problem size of the parameters is Kernel Tuner's callable of the configuration too
            "problem_size": (lambda params: self.spec.launch_problem(config_of(params), self.problem))
            if any(self.spec.problem_exprs)
            else tuple(self.problem),
            "arguments": [  # a caller's array used in place is on the device; Kernel Tuner takes numpy
                self.cp.asnumpy(a) if hasattr(a, "__cuda_array_interface__") else a for a in self._host
            ],
            "cmem_args": {k: self.cp.asnumpy(v) for k, v in self._constants.items()} or None,
            "tune_params": {
                p.name: list(self.spec.labels.get(p.name, [int(v) for v in p.values]))
                for p in self.spec.params
            },
            "grid_div_x": divisor(0),
            "grid_div_y": divisor(1),
            "grid_div_z": divisor(2),
            "block_size_names": list(self.spec.block_size_names),
            "compiler_options": list(self.spec.compiler_options),
            # a reference that depends on the configuration has no one answer: Kernel Tuner checks nothing
            "answer": None
            if per_config
            else [self.cp.asnumpy(expected[i]) if i in expected else None for i in range(len(self._host))],
            "atol": self.spec.atol,
            **({"smem_args": {"size": shared_size}} if self.spec.shared_memory is not None else {}),
            "lang": "cupy",
        }

    def close(self) -> None:
        """Stop compiling ahead (the Python API's call that built this workload has ended)."""
        self.compiler.close()

    def describe(self) -> dict[str, Any]:
        return {
            "workload": self.name,
            "case": self.case,
            "kernels": [self.spec.kernel_base],
            "spec": str(self.spec.path),
            "source": str(self.spec.source),
            "problem_size": list(self.problem),
            "backend": self.backend.name,
            "compile_workers": self.compiler.workers,
            "objective": self.spec.objective.as_dict(),
            "measures": self.measures(),
        }


def make_workload(
    case: str, size: str | Sequence[int] | None, backend: str = "auto", **options: Any
) -> KernelWorkload:
    """``make_workload("convolution", "4096x4096", spec="kernels/examples/convolution.yaml")``; ``size``
    None takes the spec's ``problem_size``."""
    check_options(options)
    return KernelWorkload(case, size, backend, **options)
