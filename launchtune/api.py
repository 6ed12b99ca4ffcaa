"""The Python API: ``tune_kernel`` in Kernel Tuner's vocabulary, ``sweep`` for a sweep spec, ``load`` for a
sweep folder; each returns a :class:`Result`.

``tune_kernel`` is the ``kernel`` workload (:mod:`launchtune.kernels.kernel`) run by the sweep runner
(:func:`launchtune.pipeline.sweep.run.run_sweep`), as ``launchtune sweep`` runs it: the call writes the
kernel's source, a kernel spec and a sweep spec into ``OUT/inputs/<hash>/``, its arrays as ``.npy`` files
beside them, and the loaders that read any spec check them. The same sweep runs again from the command line
(``launchtune sweep OUT/inputs/<hash>/sweep.yaml --out OUT``), and a changed kernel or array is another
``<hash>``, so a folder never mixes two kernels' rows. A restriction given as a Python function is
evaluated here, in the caller's process (it is the caller's code), over every combination of the
parameters; the configurations it allows travel as ``allowed.npy``.

Messages go through :mod:`logging` (the ``launchtune`` logger, silent until the program configures a
handler); a progress bar shows in a notebook (``tqdm.auto``) or on a terminal.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import logging
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

logger = logging.getLogger(__name__)

# Combinations a Python restriction is asked about at most: each is one call in this process.
MAX_RESTRICTION_CALLS = 2_000_000
# Kernel Tuner's name of the exhaustive search; ours is the exhaustive sampler.
EXHAUSTIVE = ("brute_force", "exhaustive")
KERNEL_WORKLOAD = "kernel"  # the sweep's workload (the CPU tests stand a fake CuPy in for it)


@dataclass
class Result:
    """A sweep folder's results: ``rows`` (every measured configuration, a DataFrame), ``best`` (the
    re-measured pick of the only GPU class; ``best_for(cls)`` with several), ``folder``, ``report``."""

    folder: Path

    @property
    def rows(self) -> Any:
        """Every row of the sweep, ok, invalid and failed (a pandas DataFrame; ``status`` tells them apart,
        ``total_ms`` is the median time)."""
        from launchtune.pipeline.store.shards import load_merged

        return load_merged(self.folder)

    @property
    def tuning_table(self) -> dict[str, Any]:
        from launchtune.pipeline.errors import UserError
        from launchtune.pipeline.store.folder import SweepFolder

        table = SweepFolder(self.folder).read_tuning_table()
        if table is None:
            raise UserError(f"{self.folder}: no tuning_table.json (the sweep has not finished its report)")
        return table

    @property
    def gpu_classes(self) -> list[str]:
        return [str(e["gpu_class"]) for e in self._entries()]

    def _entries(self) -> list[dict[str, Any]]:
        return [e for e in self.tuning_table.get("entries", []) if isinstance(e, dict) and "best" in e]

    def _entry(self, gpu_class: str | None) -> dict[str, Any]:
        entries = self._entries()
        if gpu_class is None:
            if len(entries) != 1:
                classes = ", ".join(str(e["gpu_class"]) for e in entries) or "none"
                raise ValueError(f"{self.folder}: a pick per GPU class ({classes}); use best_for(gpu_class)")
            return entries[0]
        for entry in entries:
            if entry["gpu_class"] == gpu_class:
                return entry
        raise KeyError(f"{self.folder}: no pick for GPU class {gpu_class!r} (has: {self.gpu_classes})")

    @property
    def best(self) -> dict[str, int]:
        """The fastest configuration after re-measuring the candidates (the tuning table's pick)."""
        return dict(self._entry(None)["best"])

    @property
    def best_ms(self) -> float:
        return float(self._entry(None)["best_ms"])

    def best_for(self, gpu_class: str) -> dict[str, int]:
        return dict(self._entry(gpu_class)["best"])

    @property
    def report(self) -> dict[str, Any]:
        """``report.json``, read through the bounded reader (a FIFO, a key twice: one line)."""
        from launchtune.pipeline.errors import UserError
        from launchtune.pipeline.jsonio import parse_json, read_regular_bytes

        path = self.folder / "report.json"
        data = read_regular_bytes(path, "report", missing_ok=True, max_bytes=REPORT_MAX_BYTES)
        if data is None:
            raise UserError(f"{self.folder}: no report.json (the sweep has not finished its report)")
        report = parse_json(data, path, "report")
        if not isinstance(report, dict):
            raise UserError(f"{path}: not a report (a JSON object)")
        return report

    def to_kernel_tuner_cache(self, path: str | Path) -> list[Path]:
        """The measured configurations as Kernel Tuner cache files: ``path`` (``.json`` or ``.json.gz``) for
        a sweep of one GPU class, else a folder of ``<class>.json.gz``."""
        from launchtune.pipeline.store.datasets import load_datasets
        from launchtune.pipeline.strategies.kt_cache import write_cache

        datasets = load_datasets(str(self.folder))
        path = Path(path)
        if path.name.endswith((".json", ".json.gz")):
            if len(datasets) != 1:
                raise ValueError(f"{self.folder}: holds {len(datasets)} GPU classes; give a folder")
            return [write_cache(datasets[0], path)]
        return [write_cache(d, path / f"{d.name}.json.gz") for d in datasets]

    def __repr__(self) -> str:
        try:
            picks = ", ".join(
                f"{e['gpu_class']}: {e['best']} ({e['best_ms']:.4g} ms)" for e in self._entries()
            )
        except Exception:  # noqa: BLE001  (a repr never raises: an unfinished folder is still shown)
            picks = "no pick yet"
        return f"Result({str(self.folder)!r}, {picks})"


REPORT_MAX_BYTES = 64 * 2**20  # a report of many GPU classes is a few hundred kilobytes


def load(folder: str | Path) -> Result:
    """The results of a finished sweep folder (``launchtune sweep``'s, or ``tune_kernel``'s ``out``)."""
    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.store.folder import SweepFolder

    path = Path(folder).expanduser().resolve()
    if not path.is_dir() or SweepFolder(path).read_meta() is None:
        raise UserError(f"{folder}: not a sweep folder (no sweep.json)")
    result = Result(path)
    if (path / "report.json").exists() or (path / "report.json").is_symlink():
        result.report  # noqa: B018 (read now: a malformed report is refused here, not at first use)
    return result


def _in_notebook() -> bool:
    return "ipykernel" in sys.modules


def sweep(
    spec: str | Path | Mapping[str, Any],
    *,
    cluster: Any = None,
    out: str | Path | None = None,
    samples: int | None = None,
    seed: int | None = None,
    gpu_classes: str | Sequence[str] | None = None,
    strategy: str | None = None,
    budget: int | None = None,
    prior: Sequence[str | Path] | None = None,
    max_minutes: float | None = None,
    workers_per_class: int = 1,
    allow_workload: Sequence[str] = (),
    force: bool = False,
    progress: bool | None = None,
) -> Result:
    """Run a sweep spec (a YAML path, or its mapping: relative paths in it are then relative to the current
    folder) as ``launchtune sweep`` does, with the same overrides; ``cluster``: None or ``"local"``,
    ``"slurm"``, a cluster config's path, or a Dask ``Client`` or cluster object (used, left running).
    ``progress``: a progress bar (None: in a notebook or on a terminal)."""
    from launchtune.pipeline.logs import progress_bars
    from launchtune.pipeline.store.spec import parse_spec
    from launchtune.pipeline.sweep.plan import plan_sweep
    from launchtune.pipeline.sweep.run import run_plan

    given = (
        parse_spec(dict(spec), str(Path.cwd() / "sweep spec")) if isinstance(spec, Mapping) else Path(spec)
    )
    plan = plan_sweep(
        given,
        cluster="local" if cluster is None else (str(cluster) if isinstance(cluster, Path) else cluster),
        out=Path(out) if out is not None else None,
        samples=samples,
        gpu_classes=gpu_classes.split(",") if isinstance(gpu_classes, str) else gpu_classes,
        force=force,
        seed=seed,
        max_minutes=max_minutes,
        workers_per_class=workers_per_class,
        allow_workload=list(allow_workload),
        strategy=strategy,
        budget=budget,
        prior=[str(p) for p in prior] if prior is not None else None,
    )
    logger.info(
        f"sweep {plan.spec.name}: {plan.spec.workload}/{plan.spec.case}/{plan.spec.size} -> {plan.out}"
    )
    with progress_bars(progress if progress is not None else (True if _in_notebook() else None)):
        _run_ending_on_signals(run_plan, plan)
    return Result(plan.out)


def _run_ending_on_signals(run: Callable[[Any], Any], plan: Any) -> None:
    """``run(plan)`` ended cleanly by SIGINT and SIGTERM, as the command line is (``pipeline.interrupts``):
    the cluster's Dask workers closed, the sweep's lock released, then the signal's own ending (SIGTERM ends
    the process as SIGTERM does; SIGINT is a ``KeyboardInterrupt``). Without this, a program ended by SIGTERM
    left its workers running, holding GPU memory. Only where the caller left both signals at Python's
    defaults (a handler of the caller's is theirs to honour) and in the main thread."""
    import signal

    from launchtune.pipeline.interrupts import Interrupted, signals_interrupt

    defaults = (signal.SIG_DFL, signal.default_int_handler)
    if any(signal.getsignal(s) not in defaults for s in (signal.SIGINT, signal.SIGTERM)):
        run(plan)
        return
    try:
        with signals_interrupt():
            run(plan)
    except Interrupted as exc:
        if exc.signum == signal.SIGTERM and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            import os

            os.kill(os.getpid(), signal.SIGTERM)  # the workers are closed: now end as SIGTERM ends a process
        raise KeyboardInterrupt(exc.args[0] if exc.args else "interrupted") from None


# -- tune_kernel ------------------------------------------------------------------------------------------


def _source(kernel_source: str | Path) -> str:
    """Kernel Tuner's ``kernel_source``: the code, or the name of a file holding it."""
    if isinstance(kernel_source, Path) or (
        isinstance(kernel_source, str) and "\n" not in kernel_source and len(kernel_source) < 4096
    ):
        path = Path(kernel_source)
        if path.is_file():
            return path.read_text(encoding="utf-8")
        if isinstance(kernel_source, Path) or "__global__" not in kernel_source:
            raise FileNotFoundError(f"kernel_source: no such file {kernel_source}")
    if not isinstance(kernel_source, str):
        raise TypeError(f"kernel_source: expected the CUDA code or a file name, got {type(kernel_source)}")
    return kernel_source


def _problem_size(problem_size: Any) -> list[int]:
    dims = [problem_size] if isinstance(problem_size, int | np.integer) else list(problem_size)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, int | np.integer) and d >= 1 for d in dims):
        raise ValueError(f"problem_size: expected one to three positive integers, got {problem_size!r}")
    return [int(d) for d in dims]


def _tune_params(tune_params: Mapping[str, Sequence[Any]], blocks: Sequence[str]) -> dict[str, list[Any]]:
    """Each parameter's values: integers, floats or text (as the kernel spec takes them, ``#define`` text);
    the thread block's (``blocks``) whole numbers."""
    if not isinstance(tune_params, Mapping) or not tune_params:
        raise ValueError("tune_params: expected a dict of parameter name to its list of values")
    out: dict[str, list[Any]] = {}
    for name, values in tune_params.items():
        values = (
            list(values)
            if isinstance(values, Sequence | np.ndarray) and not isinstance(values, str)
            else [values]
        )
        if not values or not all(isinstance(v, int | float | str | np.integer | np.floating) for v in values):
            raise ValueError(
                f"tune_params[{name!r}]: expected a list of integers, floats or text, got {values!r}"
            )
        whole = all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in values)
        if name in blocks and not whole:
            raise ValueError(
                f"tune_params[{name!r}]: a thread block's size takes whole numbers, got {values!r}"
            )
        out[str(name)] = [v.item() if isinstance(v, np.generic) else v for v in values]
    return out


def _divisors(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str | int) else list(value)
    if not all(isinstance(v, str | int) for v in items):
        raise TypeError(f"{where}: expected parameter names or expressions (strings), got {value!r}")
    return [str(v) for v in items]


class _Writer:
    """The files of one ``tune_kernel`` call, collected in memory, then written under a folder named by
    their hash."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def npy(self, name: str, array: np.ndarray) -> str:
        import io

        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
        self.files[name] = buffer.getvalue()
        return name

    def text(self, name: str, text: str) -> str:
        self.files[name] = text.encode("utf-8")
        return name

    def digest(self) -> str:
        """A hash of the files so far (the sweep spec, which names the folder, is written after)."""
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return h.hexdigest()[:12]

    def write(self, folder: Path) -> None:
        from launchtune.kernels.atomic import atomic_path

        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            target = folder / name
            if target.is_file() and target.read_bytes() == data:
                continue
            with atomic_path(target) as tmp:
                Path(tmp).write_bytes(data)


def _arguments(
    arguments: Sequence[Any],
    answer: Sequence[Any] | None,
    cmem_args: Mapping[str, np.ndarray] | None,
    files: _Writer,
) -> list[dict[str, Any]]:
    """The kernel spec's ``arguments``: each array as a ``.npy`` fill, each scalar as its value; ``answer``'s
    arrays as the outputs checked (without one, every array is checked against the default
    configuration's); ``cmem_args`` as ``__constant__`` copies (passed too where the same array is an
    argument)."""
    from launchtune.kernels.kernel.arguments import DTYPES

    if answer is not None and len(answer) != len(arguments):
        raise ValueError(
            f"answer: {len(answer)} entries for {len(arguments)} arguments (None where unchecked)"
        )
    constants = {id(a): (s, np.asarray(a)) for s, a in (cmem_args or {}).items()}  # by identity, as KT
    out: list[dict[str, Any]] = []
    for i, value in enumerate(arguments):
        where = f"arguments[{i}]"
        if isinstance(value, np.ndarray):
            dtype = str(value.dtype)
            if dtype not in DTYPES:
                raise TypeError(f"{where}: dtype {dtype} (supported: {', '.join(DTYPES)})")
            entry: dict[str, Any] = {
                "name": f"arg{i}",
                "dtype": dtype,
                "shape": list(value.shape) or [1],
                "fill": {"npy": files.npy(f"arg{i}.npy", value.reshape(value.shape or (1,)))},
            }
            expected = answer[i] if answer is not None else None
            if expected is not None:
                expected = np.asarray(expected)
                if expected.shape != value.shape:
                    raise ValueError(f"answer[{i}]: shape {expected.shape}, the argument's is {value.shape}")
                entry["answer"] = files.npy(f"answer{i}.npy", expected.astype(value.dtype, copy=False))
            else:
                entry["output"] = answer is None
            if id(value) in constants:
                entry.update(constant=constants.pop(id(value))[0], argument=True)
            out.append(entry)
        elif isinstance(value, np.generic) or (
            isinstance(value, int | float) and not isinstance(value, bool)
        ):
            if answer is not None and answer[i] is not None:
                raise ValueError(f"answer[{i}]: argument {i} is a scalar; an answer is checked on an array")
            if isinstance(value, np.generic):
                dtype = str(np.asarray(value).dtype)
            else:  # a plain Python number: Kernel Tuner's numpy scalars are the usual way
                dtype = "int32" if isinstance(value, int) else "float32"
            if dtype not in DTYPES:
                raise TypeError(f"{where}: dtype {dtype} (supported: {', '.join(DTYPES)})")
            number = value.item() if isinstance(value, np.generic) else value
            if isinstance(number, float) and not math.isfinite(number):
                raise ValueError(f"{where}: {number} is not a finite number")
            out.append({"name": f"arg{i}", "dtype": dtype, "value": repr(number)})
        else:
            raise TypeError(f"{where}: expected a numpy array or a numpy scalar, got {type(value).__name__}")
    for symbol, array in constants.values():  # constant memory that is not also an argument
        j = len(out)
        out.append(
            {
                "name": f"cmem_{symbol}",
                "dtype": str(array.dtype),
                "shape": list(array.shape) or [1],
                "fill": {"npy": files.npy(f"cmem{j}.npy", array.reshape(array.shape or (1,)))},
                "constant": symbol,
                "argument": False,
            }
        )
    return out


def _restrictions(
    restrictions: Any, params: dict[str, list[int]], files: _Writer
) -> tuple[list[str], str | None]:
    """Strings go into the kernel spec as they are; functions of a configuration (a dict, Kernel Tuner's
    convention) are asked here about every combination, and those they allow become ``allowed.npy``."""
    if restrictions is None:
        return [], None
    items = [restrictions] if isinstance(restrictions, str) or callable(restrictions) else list(restrictions)
    texts = [r for r in items if isinstance(r, str)]
    functions = [r for r in items if callable(r)]
    if len(texts) + len(functions) != len(items):
        raise TypeError("restrictions: expected strings or functions of a configuration (a dict)")
    if not functions:
        return texts, None
    names = list(params)
    count = math.prod(len(v) for v in params.values())
    if count > MAX_RESTRICTION_CALLS:
        raise ValueError(
            f"restrictions: a Python function would be called for {count:,} combinations (at most "
            f"{MAX_RESTRICTION_CALLS:,}); write the restriction as a string expression instead"
        )
    for f in functions:
        if len(inspect.signature(f).parameters) != 1:
            raise TypeError(f"restrictions: {f!r} must take one argument, the configuration (a dict)")
    allowed = [
        combo
        for combo in itertools.product(*params.values())
        if all(f(dict(zip(names, combo, strict=True))) for f in functions)
    ]
    if not allowed:
        raise ValueError("restrictions: no configuration satisfies the restriction functions")
    return texts, files.npy("allowed.npy", np.array(allowed, dtype=np.int64))


def tune_kernel(
    kernel_name: str,
    kernel_source: str | Path,
    problem_size: int | Sequence[int],
    arguments: Sequence[Any],
    tune_params: Mapping[str, Sequence[Any]],
    *,
    restrictions: str | Callable[[dict[str, int]], bool] | Sequence[Any] | None = None,
    grid_div_x: str | Sequence[str] | None = None,
    grid_div_y: str | Sequence[str] | None = None,
    grid_div_z: str | Sequence[str] | None = None,
    block_size_names: Sequence[str] | None = None,
    cmem_args: Mapping[str, np.ndarray] | None = None,
    answer: Sequence[Any] | None = None,
    atol: float = 1e-6,
    compiler_options: Sequence[str] | None = None,
    iterations: int = 7,
    metrics: Mapping[str, str] | None = None,
    objective: str | None = None,
    objective_higher_is_better: bool = False,
    strategy: str | None = None,
    budget: int | None = None,
    cluster: Any = None,
    gpu_classes: str | Sequence[str] | None = None,
    out: str | Path | None = None,
    seed: int = 0,
    force: bool = False,
    progress: bool | None = None,
) -> Result:
    """Tune a CUDA kernel's parameters on every GPU class of ``cluster``, in Kernel Tuner's terms.

    ``kernel_source`` is the code or a file; ``arguments`` numpy arrays and numpy scalars in the kernel's
    order; ``tune_params`` each parameter's values (the first is the default configuration), which reach
    the source as ``#define``s; ``restrictions`` strings (expressions over the parameters and
    ``problem_size_x/y/z``) or functions of a configuration (run here); ``grid_div_x/y/z`` what divides
    the problem size (default: the block size parameter); ``answer`` the expected arrays (None where an
    argument is not checked; without it every array must match the default configuration's), within
    ``atol`` + 1e-5 relative; ``iterations`` timed launches per configuration (the median).

    ``metrics``: named expressions (strings, in the kernel spec's language, never Python functions: they are
    evaluated on the workers) over the parameters, ``problem_size_x/y/z``, ``time`` (ms per launch) and, where
    NVML has an energy counter, ``energy_mJ`` and ``power_W``; ``objective``: the metric or measured quantity
    every ranking uses (default ``time``), maximised where ``objective_higher_is_better`` (Kernel Tuner's
    names for both).

    ``strategy``: None or ``"brute_force"`` measures every configuration, or ``budget`` random ones; a
    strategy name (``launchtune strategies --list``; ``kt:<name>`` for Kernel Tuner's) searches within
    ``budget`` measurements per GPU class (default 400, where the default strategy's worst seed was right:
    ``launchtune sweep --help``). ``cluster``: None or ``"local"`` (this machine's GPUs), ``"slurm"``, a
    cluster config's path, or a Dask ``Client`` or cluster object (used, left running). ``out``: the
    sweep folder (default ``results/<kernel_name>``); the same call again resumes it.
    """
    from launchtune.kernels.kernel.spec import kernel_defined
    from launchtune.pipeline.paths import check_slug, out_folder, results_root
    from launchtune.pipeline.store.ownership import claim

    code = _source(kernel_source)
    if not isinstance(kernel_name, str) or not kernel_defined(code, kernel_name):
        raise ValueError(f"kernel_name: no '__global__ ... {kernel_name}(' in the kernel source")
    dims = _problem_size(problem_size)
    params = _tune_params(tune_params, block_size_names or ("block_size_x", "block_size_y", "block_size_z"))
    files = _Writer()
    texts, allowed = _restrictions(restrictions, params, files)
    kernel: dict[str, Any] = {
        "source": files.text("kernel.cu", code),
        "kernel_name": kernel_name,
        "problem_size": dims,
        "tune_params": params,
        "arguments": _arguments(arguments, answer, cmem_args, files),
        "atol": float(atol),
    }
    if texts:
        kernel["restrictions"] = texts
    if allowed:
        kernel["allowed"] = allowed
    for dim, value in zip("xyz", (grid_div_x, grid_div_y, grid_div_z), strict=True):
        divisors = _divisors(value, f"grid_div_{dim}")
        if divisors is not None:
            kernel[f"grid_div_{dim}"] = divisors
    if block_size_names is not None:
        kernel["block_size_names"] = list(block_size_names)
    if compiler_options:
        kernel["compiler_options"] = list(compiler_options)
    if metrics:
        if not isinstance(metrics, Mapping) or not all(isinstance(v, str) for v in metrics.values()):
            raise TypeError(
                "metrics: expected a dict of name to an expression string (not a Python function)"
            )
        kernel["metrics"] = {str(k): v for k, v in metrics.items()}
    if objective is not None:
        if not isinstance(objective, str):
            raise TypeError(
                f"objective: expected the name of a metric or a measured quantity, got {objective!r}"
            )
        kernel["objective"] = {"maximize" if objective_higher_is_better else "minimize": objective}
    files.text("kernel.yaml", yaml.safe_dump(kernel, sort_keys=False, default_flow_style=None))

    name = check_slug(kernel_name, "kernel_name")
    folder = out_folder(Path(out), "out") if out is not None else results_root() / name
    inputs = folder / "inputs" / files.digest()  # other kernel files, another folder and planning key
    exhaustive = strategy is None or strategy in EXHAUSTIVE
    sweep_spec: dict[str, Any] = {
        "name": name,
        "description": f"tune_kernel({kernel_name!r}) from Python",
        "workload": KERNEL_WORKLOAD,
        "case": name,
        "size": "x".join(map(str, dims)),
        "backend": "auto",
        "options": {"spec": str(inputs / "kernel.yaml")},
        "samplers": ["exhaustive"] if exhaustive and budget is None else ["random"],
        "samples": budget if exhaustive and budget is not None else 0,
        "repeats": iterations,
        "batch_size": "auto",
        "seed": seed,
    }
    if not exhaustive:  # without a budget, the spec's default (store.spec.DEFAULT_BUDGET)
        sweep_spec["search"] = {"strategy": strategy, **({"budget": budget} if budget is not None else {})}
    files.text("sweep.yaml", yaml.safe_dump(sweep_spec, sort_keys=False, default_flow_style=None))

    claim(folder, "sweep", "out")  # a new or empty folder, or a sweep's: the inputs go inside it
    files.write(inputs)
    logger.info(f"tune_kernel {kernel_name}: inputs in {inputs}")
    return sweep(
        inputs / "sweep.yaml",
        cluster=cluster,
        out=folder,
        gpu_classes=gpu_classes,
        force=force,
        progress=progress,
        allow_workload=[KERNEL_WORKLOAD] if ":" in KERNEL_WORKLOAD else (),
    )
