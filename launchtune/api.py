"""The Python API: ``tune_kernel`` and ``run_kernel`` as Kernel Tuner's, ``sweep`` for a sweep spec,
``load`` for a sweep folder (these two return a :class:`Result`).

``tune_kernel`` is Kernel Tuner 1.5's (its parameters in its order, its ``(results, env)`` returned:
:mod:`launchtune.kernel_tuner_compat`), on the ``kernel`` workload (:mod:`launchtune.kernels.kernel`) run by
the sweep runner (:func:`launchtune.pipeline.sweep.run.run_plan`), as ``launchtune sweep`` runs it. Its
arguments are checked first (:mod:`launchtune.checks`), then the GPU (:class:`NoGPUError`); then the call
writes the kernel's source, a kernel spec and a sweep spec into ``OUT/inputs/<hash>/``, its arrays as
``.npy`` files beside them, and the loaders that read any spec check them. The same sweep runs again from
the command line (``launchtune sweep OUT/inputs/<hash>/sweep.yaml --out OUT``), and a changed kernel or
array is another ``<hash>``, so a folder never mixes two kernels' rows. A restriction given as a Python
function is evaluated here, in the caller's process (it is the caller's code), over every combination of the
parameters; the configurations it allows travel as ``allowed.npy``.

Messages go through :mod:`logging` (the ``launchtune`` logger, silent until the program configures a
handler); a progress bar shows in a notebook (``tqdm.auto``) or on a terminal.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import inspect
import itertools
import logging
import math
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

logger = logging.getLogger(__name__)

# Combinations a Python restriction is asked about at most: each is one call in this process.
MAX_RESTRICTION_CALLS = 2_000_000
# Kernel Tuner's NVML observables from what a row records: energy per launch in J, mean power in W.
NVML_OBSERVABLES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "nvml_energy": lambda r: r["energy_mJ"] / 1000 if r.get("energy_mJ") is not None else None,
    "nvml_power": lambda r: r.get("power_W"),
}
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
        from launchtune.kernels.tuning_table import TableError, in_folder, sweep_entries

        try:
            entries: list[Any] = sweep_entries(self.tuning_table, in_folder(self.folder))
        except TableError as exc:
            from launchtune.pipeline.errors import UserError

            raise UserError(str(exc)) from None
        return entries

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
        """The fastest configuration after re-measuring the candidates (the tuning table's pick). Measured on
        the numpy backend (a CPU), where launch parameters change nothing, it comes with a warning, as the
        report says: which configuration measured fastest there is timing noise."""
        entry = self._entry(None)
        _warn_if_noise(self, str(entry["gpu_class"]))
        return dict(entry["best"])

    @property
    def best_ms(self) -> float:
        """The pick's objective cost (its time in ms where the objective is time; lower is better)."""
        return float(self._entry(None)["best_ms"])

    @property
    def best_value(self) -> str:
        """The pick's value in the objective's own unit and direction (``5508 GFLOP/s``, ``1.23 ms``)."""
        from launchtune.kernels.objective import from_dict

        entry = self._entry(None)
        return from_dict(entry.get("objective")).show(entry.get("best_ms"))

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
            from launchtune.kernels.objective import from_dict

            picks = ", ".join(
                f"{e['gpu_class']}: {e['best']} ({from_dict(e.get('objective')).show(e['best_ms'])})"
                for e in self._entries()
            )
        except Exception:  # noqa: BLE001  (a repr never raises: an unfinished folder is still shown)
            picks = "no pick yet"
        return f"Result({str(self.folder)!r}, {picks})"


REPORT_MAX_BYTES = 64 * 2**20  # a report of many GPU classes is a few hundred kilobytes


def _warn_if_noise(result: Result, gpu_class: str) -> None:
    """A warning where ``gpu_class``'s pick was measured on the numpy backend (the report's numpy note)."""
    import warnings

    from launchtune.pipeline.errors import UserError

    folder = result.folder
    try:
        backend = result.report["classes"][gpu_class].get("backend")
    except (UserError, KeyError, TypeError, AttributeError):
        return
    if backend == "numpy":
        warnings.warn(
            f"{folder}: {gpu_class} was measured on the numpy backend (a CPU), where launch parameters "
            "change nothing: this pick is timing noise, not a faster launch (report.md says the same)",
            UserWarning,
            stacklevel=3,
        )


def load(folder: str | Path) -> Result:
    """The results of a finished sweep folder (``launchtune sweep``'s, or ``tune_kernel``'s ``out``)."""
    from launchtune.checks import check_arguments
    from launchtune.pipeline.errors import UserError
    from launchtune.pipeline.store.folder import SweepFolder

    check_arguments({"folder": folder})
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
    train_models: bool | None = None,
    remeasure: bool | None = None,
) -> Result:
    """Run a sweep spec (a YAML path, or its mapping: relative paths in it are then relative to the current
    folder) as ``launchtune sweep`` does, with the same overrides; ``cluster``: None or ``"local"``,
    ``"slurm"``, a cluster config's path, or a Dask ``Client`` or cluster object (used, left running).
    ``progress``: a progress bar (None: in a notebook or on a terminal). ``train_models``, ``remeasure``:
    as ``--train-models`` and ``--remeasure`` (None: the spec's; by default a sweep without a search does
    both, a search neither)."""
    from launchtune.checks import check_arguments
    from launchtune.pipeline.logs import progress_bars
    from launchtune.pipeline.store.spec import parse_spec

    check_arguments(dict(locals()))
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
        train_models=train_models,
        remeasure=remeasure,
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
    left its workers running, holding GPU memory. Only the signals the caller left at Python's defaults (a
    handler of the caller's, or an ignored signal, is theirs to honour), and in the main thread."""
    import signal

    from launchtune.pipeline.interrupts import Interrupted, signals_interrupt

    defaults = (signal.SIG_DFL, signal.default_int_handler)
    # each signal left at its default is ours to end cleanly; one the caller handles or ignores stays theirs
    # (a program started in the background by a shell ignores SIGINT, and SIGTERM must still release the lock)
    ours = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) in defaults]
    if threading.current_thread() is not threading.main_thread():  # no signal reaches it; the exit does
        with _ended_at_exit():
            run(plan)
        return
    if not ours:
        run(plan)
        return
    try:
        with signals_interrupt(ours):
            run(plan)
    except Interrupted as exc:
        if exc.signum == signal.SIGTERM and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            import os

            os.kill(os.getpid(), signal.SIGTERM)  # the workers are closed: now end as SIGTERM ends a process
        raise KeyboardInterrupt(exc.args[0] if exc.args else "interrupted") from None


class CallerExited(SystemExit):
    """Raised inside a sweep that runs in a thread of a program whose main thread has ended (its exit handlers
    run): the sweep unwinds as an interrupted one does. A ``SystemExit``, so the thread ends without a
    traceback."""


EXIT_WAIT_S = 60.0  # how long the program's exit waits for such a sweep to close its cluster and lock
_running: dict[int, threading.Event] = {}  # thread id -> set once its sweep has unwound
_exiting: list[bool] = []  # [True] once the program's exit began ending them


@contextlib.contextmanager
def _ended_at_exit() -> Iterator[None]:
    """A sweep run in a thread other than the main one ends when the program does: a daemon thread is
    stopped where it stands at the interpreter's end, with its cluster's close, its lock's release and the
    training pool's end never run (the lock was left; on a GPU, workers outlived it holding memory). At the
    program's exit (``atexit``: the main thread has ended, such a thread still runs) the sweep is interrupted
    in its thread and its ``with`` blocks unwind, waited for ``EXIT_WAIT_S`` at most. A thread that is not a
    daemon is waited for by Python before ``atexit``: its sweep ends as it would."""
    atexit.unregister(_end_running_sweeps)  # registered once, and last: it runs before Dask's own
    atexit.register(_end_running_sweeps)
    done = _running.setdefault(threading.get_ident(), threading.Event())
    try:
        yield
    except BaseException:
        # CallerExited, or what the unwinding broke on its way: a plain SystemExit, the one exception a thread
        # ends with in silence (threading.excepthook). Dask's own exit handlers, registered when the sweep
        # started its client (after ours, so run before ours), can close the client before ``_exiting`` is
        # set: a main thread that has ended says the program is exiting as well.
        if _exiting or not threading.main_thread().is_alive():
            raise SystemExit() from None
        raise
    finally:
        done.set()
        _running.pop(threading.get_ident(), None)


def _end_running_sweeps() -> None:
    # CPython's way to raise in another thread (no public API does it); the exception arrives at the thread's
    # next Python step: the sweep's waits poll (``cluster.waits``), so within a fraction of a second
    _exiting.append(True)
    for ident, done in list(_running.items()):
        if not done.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(CallerExited))
    for done in list(_running.values()):
        done.wait(EXIT_WAIT_S)


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
    if not 1 <= len(dims) <= 3 or not all(
        isinstance(d, int | np.integer) and not isinstance(d, bool | np.bool_) and d >= 1 for d in dims
    ):
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
    given: dict[int, Any] | None = None,
    verified: Sequence[Any] | None = None,
) -> list[dict[str, Any]]:
    """The kernel spec's ``arguments``: each array as a ``.npy`` fill, each scalar as its value; ``answer``'s
    arrays as the outputs checked (None: nothing checked); ``cmem_args`` as ``__constant__`` copies (passed
    too where the same array is an argument). Where ``given`` is a dict (one local device, in this process),
    a device array is not copied: it goes into ``given`` by position and the spec names it by a
    fingerprint (``fill: {caller: ...}``); a host array is copied to the device first, once, as Kernel Tuner
    copies its arguments at each call (writing it as a ``.npy``, hashing that and reading it back cost seconds
    a call for a large array: Kernel Tuner's ``reduction`` hands 3.2 GB to each of its twelve calls).
    ``verified``: ``verify=``'s answer (or None for every array): the arrays it names are reset before each
    check's launch (``output: true``), nothing is compared here."""
    from launchtune.kernels.kernel.arguments import DTYPES

    if answer is not None and len(answer) != len(arguments):
        raise ValueError(
            f"answer: {len(answer)} entries for {len(arguments)} arguments (None where unchecked)"
        )
    constants = {id(a): (s, np.asarray(a)) for s, a in (cmem_args or {}).items()}  # by identity, as KT
    out: list[dict[str, Any]] = []
    to_device = _device_copier() if given is not None else None
    for i, value in enumerate(arguments):
        where = f"arguments[{i}]"
        constant = constants.pop(id(value), None)  # by the caller's object, before any copy
        in_place = given is not None and (_on_device(value) or isinstance(value, np.ndarray))
        if in_place and not _on_device(value):
            assert to_device is not None
            value = to_device(value)
        elif not in_place:
            value = _host_array(value)
        if in_place or isinstance(value, np.ndarray):
            dtype = str(value.dtype)
            if dtype not in DTYPES:
                raise TypeError(f"{where}: dtype {dtype} (supported: {', '.join(DTYPES)})")
            entry: dict[str, Any] = {
                "name": f"arg{i}",
                "dtype": dtype,
                "shape": list(value.shape) or [1],
                "fill": {"caller": _fingerprint(value)}
                if in_place
                else {"npy": files.npy(f"arg{i}.npy", value.reshape(value.shape or (1,)))},
            }
            if in_place:
                assert given is not None
                given[i] = value
            expected = answer[i] if answer is not None else None
            if verified is not None and (not verified or verified[i] is not None):
                entry["output"] = True  # reset before each check's launch; verify= judges it
            elif expected is not None:
                expected = np.asarray(expected)
                if expected.shape != value.shape:
                    raise ValueError(f"answer[{i}]: shape {expected.shape}, the argument's is {value.shape}")
                entry["answer"] = files.npy(f"answer{i}.npy", expected.astype(np.dtype(str(value.dtype))))
            else:  # Kernel Tuner's answer=None: nothing is checked
                entry["output"] = False
            if constant is not None:
                entry.update(constant=constant[0], argument=True)
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
    restrictions: Any, params: dict[str, list[Any]], files: _Writer
) -> tuple[list[str], str | None, list[tuple[Any, ...]] | None]:
    """Strings go into the kernel spec as they are; functions of a configuration (a dict, Kernel Tuner's
    convention) are asked here about every combination, and those they allow become ``allowed.npy`` (the
    space's values: a float or text parameter's index); (the strings, that file, the allowed values)."""
    if restrictions is None:
        return [], None, None
    items = [restrictions] if isinstance(restrictions, str) or callable(restrictions) else list(restrictions)
    texts = [r for r in items if isinstance(r, str)]
    functions = [r for r in items if callable(r)]
    if len(texts) + len(functions) != len(items):
        raise TypeError("restrictions: expected strings or functions of a configuration (a dict)")
    if not functions:
        return texts, None, None
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
    return texts, _allowed_file(files, params, allowed), allowed


def _allowed_file(files: _Writer, params: dict[str, list[Any]], combos: list[Any]) -> str:
    """``allowed.npy``: the configurations in the space's values (a float or text parameter's index)."""
    from launchtune.kernels.kernel.fields import is_whole

    labelled = [None if is_whole(v) else v for v in params.values()]
    rows = [
        [value if values is None else values.index(value) for value, values in zip(c, labelled, strict=True)]
        for c in combos
    ]
    return files.npy("allowed.npy", np.array(rows, dtype=np.int64))


class NoGPUError(RuntimeError):
    """``tune_kernel`` or ``run_kernel`` on a machine where CuPy sees no GPU, with no cluster elsewhere and
    no ``simulation_mode``: raised before anything is written."""


def _check_gpu(cluster: Any) -> None:
    """A local run needs a GPU here; a cluster's workers are checked where they run."""
    from launchtune.kernels.backend import gpu_count

    if KERNEL_WORKLOAD != "kernel" or cluster not in (None, "local"):
        return
    if gpu_count() == 0:
        raise NoGPUError(
            "no GPU here (CuPy sees none): give cluster= (a Dask cluster or 'slurm') or replay a Kernel "
            "Tuner cache with simulation_mode=True, cache=FILE"
        )


def _refuse(name: str, why: str) -> None:
    raise ValueError(f"{name}=: {why}")


def _on_device(value: Any) -> bool:
    return hasattr(value, "__cuda_array_interface__") and hasattr(value, "get")


def _device_copier() -> Callable[[np.ndarray], Any]:
    """A host array copied to the device this process measures on (CuPy where a GPU is; the CPU tests'
    stand-in measures numpy arrays: a copy too, so the caller's array is left as it was, as on a GPU)."""
    from launchtune.kernels.backend import get_backend

    backend = get_backend("auto")
    return backend.xp.asarray if backend.is_gpu else (lambda array: np.array(array, copy=True))


def _host_array(value: Any) -> Any:
    """A CuPy (or other device) array as numpy: the kernel spec's arrays travel as ``.npy`` files."""
    return value.get() if _on_device(value) else value


FINGERPRINT_CHUNK = 1 << 26  # bytes of a device array summed at a time (eight times that as uint64 words)


def _fingerprint(array: Any) -> str:
    """A device array's contents named without copying them to the host: its dtype, shape and two weighted
    sums of its bytes (mod 2**64) computed on the device. Not a cryptographic hash: it tells a changed array
    from the one a folder was measured with, so another array is another ``inputs/<hash>`` folder. A host
    array (the CPU tests' stand-in measures numpy arrays) is hashed as it is: the sums in numpy took 15 s for
    400 MB on the CPU, SHA-256 a second."""
    try:
        import cupy

        xp: Any = cupy.get_array_module(array)
    except ImportError:
        xp = np
    if xp is np:
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8).data
        return f"{array.dtype}{list(array.shape)}:{hashlib.sha256(data).hexdigest()[:32]}"
    flat = xp.ascontiguousarray(array).reshape(-1).view(xp.uint8)
    sums = [0, 0]
    for start in range(0, int(flat.size), FINGERPRINT_CHUNK):
        words = flat[start : start + FINGERPRINT_CHUNK].astype(xp.uint64)
        index = xp.arange(start, start + int(words.size), dtype=xp.uint64)
        for k, (a, b) in enumerate(((0x9E3779B97F4A7C15, 1), (0xC2B2AE3D27D4EB4F, 0x165667B1))):
            weighted = words * (index * xp.uint64(a) + xp.uint64(b))
            sums[k] = (sums[k] + int(weighted.sum(dtype=xp.uint64))) % 2**64
    return f"{array.dtype}{list(array.shape)}:{sums[0]:016x}{sums[1]:016x}"


def _measures_here(cluster: Any) -> bool:
    """Whether the sweep measures in this process (one local device: ``pipeline.cluster.inline``)."""
    from launchtune.pipeline.cluster.inline import one_local_worker

    return cluster in (None, "local") and one_local_worker(1) is not None


def _function_text(function: Callable[..., Any]) -> str:
    """What names a Python function in the inputs' hash: its source where Python has it, else its name."""
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return f"{getattr(function, '__module__', '')}.{getattr(function, '__qualname__', repr(function))}"


def _kt_strategy(strategy: str | None) -> str | None:
    """Kernel Tuner's strategy names as ours: ``brute_force`` the exhaustive sampler, a name we do not have
    Kernel Tuner's own (``kt:<name>``)."""
    from launchtune.pipeline.strategies import strategy_names

    if strategy is None or strategy in EXHAUSTIVE or strategy in strategy_names():
        return strategy
    if f"kt:{strategy}" in strategy_names():
        return f"kt:{strategy}"
    raise ValueError(f"strategy: {strategy!r} is not a strategy (launchtune strategies --list)")


def _allows(
    params: dict[str, list[Any]], texts: list[str], dims: list[Any], blocks: Sequence[str]
) -> Callable[[dict[str, Any]], bool]:
    """Whether the string restrictions allow a configuration and its thread block fits 1024 threads (Kernel
    Tuner's own rule), evaluated here; a restriction that does not parse is one line now."""
    from launchtune.kernels.kernel.expressions import ExpressionError, parse
    from launchtune.kernels.kernel.fields import MAX_THREADS

    names = list(params)
    sizes = {f"problem_size_{d}": v for d, v in zip("xyz", [*dims, 1, 1], strict=False) if isinstance(v, int)}
    exprs = [parse(t, [*names, *sizes], f"restrictions[{i}]") for i, t in enumerate(texts)]

    def ok(config: dict[str, Any]) -> bool:
        values = {**sizes, **config}
        if math.prod(int(values.get(b, 1)) for b in blocks) > MAX_THREADS:
            return False
        try:
            return all(e(values) for e in exprs)
        except ExpressionError:
            return False

    return ok


# Configurations a code generator is asked about at most: each is one call here, its text one #if branch.
MAX_GENERATED = 10_000


def _generated_source(
    generator: Callable[[dict[str, Any]], Any],
    params: dict[str, list[Any]],
    ok: Callable[[dict[str, Any]], bool],
    rows: list[Any] | None,
) -> str:
    """Kernel Tuner's code generator, run here (the caller's code) once per configuration the restrictions
    allow: one source whose ``#if`` branches hold each distinct text, chosen by the parameters' ``#define``s
    with which every configuration is compiled, so each compiles exactly what the generator gave it."""
    from launchtune.kernels.kernel.fields import is_whole

    names = list(params)
    if not all(is_whole(v) for v in params.values()):
        raise ValueError("kernel_source: a code generator needs whole-number parameters (#if compares them)")
    texts: dict[str, list[dict[str, Any]]] = {}
    for combo in rows if rows is not None else itertools.product(*params.values()):
        config = dict(zip(names, combo, strict=True))
        if not ok(config):
            continue
        if sum(len(c) for c in texts.values()) >= MAX_GENERATED:
            raise ValueError(
                f"kernel_source: a code generator is run once per configuration, at most {MAX_GENERATED:,}; "
                "restrict the space or write the source with the parameters as #define names"
            )
        text = generator(dict(config))
        if not isinstance(text, str):
            raise TypeError(f"kernel_source: the generator returned {type(text).__name__} for {config}")
        texts.setdefault(text, []).append(config)
    if not texts:
        raise ValueError("restrictions: no configuration of tune_params satisfies them")
    if len(texts) == 1:
        return next(iter(texts))
    parts = []
    for i, (text, configs) in enumerate(texts.items()):
        cond = " || ".join("(" + " && ".join(f"{n} == {int(v)}" for n, v in c.items()) + ")" for c in configs)
        parts.append(f"{'#if' if i == 0 else '#elif'} {cond}\n{text}\n")
    return "".join(parts) + "#endif\n"


def _cached(
    path: Path | None,
    params: dict[str, list[Any]],
    ok: Callable[[dict[str, Any]], bool],
    rows: list[Any] | None,
    baseline: dict[str, Any],
) -> list[dict[str, Any]]:
    """The results a Kernel Tuner cache at ``path`` holds for configurations of this call's space (none
    where there is no file, or it is another kernel's: other ``tune_params_keys``)."""
    from launchtune import kernel_tuner_compat as kt

    data = kt.read_cache(path) if path is not None else None
    if not data or list(data.get("tune_params_keys") or []) != list(params):
        return []
    permitted = {tuple(r) for r in rows} if rows is not None else None
    return kt.cached_results(
        data, params, lambda c: ok(c) and (permitted is None or tuple(c[n] for n in params) in permitted)
    )


def metrics_names(metrics: Mapping[str, Any] | None) -> list[str]:
    return [k for k in (metrics or {}) if isinstance(k, str) and k.isidentifier()]


def _metric_here(name: str, text: str, known: list[str]) -> Callable[[dict[str, Any]], Any]:
    """A metric given as a string whose name is not an identifier (Kernel Tuner's ``"GB/s"``): evaluated
    here on each result, in the kernel spec's expression language over the parameters, ``time`` and the
    metrics named as identifiers."""
    from launchtune.kernels.kernel.expressions import parse

    expr = parse(text, known, f"metrics[{name!r}]")
    return lambda result: expr({k: v for k, v in result.items() if k in expr.names})


def _first_allowed(
    params: dict[str, list[Any]], ok: Callable[[dict[str, Any]], bool], rows: list[Any] | None
) -> dict[str, Any]:
    """Without ``default=``, the baseline is the first configuration (in ``tune_params`` order) that ``ok``
    allows, as Kernel Tuner's first valid one: nothing is required of the first values."""
    names = list(params)
    for combo in rows if rows is not None else itertools.product(*params.values()):
        config = dict(zip(names, combo, strict=True))
        if ok(config):
            return config
    raise ValueError("restrictions: no configuration of tune_params satisfies them")


def tune_kernel(
    kernel_name: str,
    kernel_source: str | Path | Callable[[dict[str, Any]], str],
    problem_size: Any,
    arguments: Sequence[Any],
    tune_params: Mapping[str, Sequence[Any]],
    grid_div_x: Any = None,
    grid_div_y: Any = None,
    grid_div_z: Any = None,
    restrictions: Any = None,
    answer: Sequence[Any] | None = None,
    atol: float = 1e-6,
    verify: Callable[..., bool] | None = None,
    verbose: bool = False,
    lang: str | None = None,
    device: int = 0,
    platform: int = 0,
    smem_args: Mapping[str, Any] | None = None,
    cmem_args: Mapping[str, Any] | None = None,
    texmem_args: Mapping[str, Any] | None = None,
    compiler: Any = None,
    compiler_options: str | Sequence[str] | None = None,
    defines: Mapping[str, Any] | None = None,
    log: Any = None,
    iterations: int = 7,
    block_size_names: Sequence[str] | None = None,
    quiet: bool = False,
    strategy: str | None = None,
    strategy_options: Mapping[str, Any] | None = None,
    cache: str | Path | None = None,
    metrics: Mapping[str, Any] | None = None,
    simulation_mode: bool | None = None,
    parallel: Any = None,
    observers: Sequence[Any] | None = None,
    objective: str | None = None,
    objective_higher_is_better: bool | None = None,
    objectives: Any = None,
    seed: int | None = None,
    *,
    default: Mapping[str, Any] | None = None,
    budget: int | None = None,
    cluster: Any = None,
    gpu_classes: str | Sequence[str] | None = None,
    out: str | Path | None = None,
    force: bool = False,
    progress: bool | None = None,
    train_models: bool = False,
    remeasure: bool = False,
) -> Any:
    """Tune a CUDA kernel's parameters, as Kernel Tuner 1.5's ``tune_kernel`` (every keyword of it has its
    meaning here or is refused in one line: docs/api.md), on every GPU class of ``cluster``.

    Returns ``(results, env)`` as Kernel Tuner does (a :class:`~launchtune.kernel_tuner_compat.TuneResult`),
    whose attributes are the sweep folder's :class:`Result` (``rows``, ``best``, ``folder``, ...).

    ``kernel_source`` is the code or a file; ``arguments`` numpy or CuPy arrays and numpy scalars in the
    kernel's order; ``tune_params`` each parameter's values, which reach the source as ``#define``s;
    ``restrictions`` strings or functions of a configuration (run here); ``grid_div_x/y/z`` what divides the
    problem size (``[]``: nothing); ``answer`` the expected arrays (None: no check), within ``atol``, or
    ``verify(answer, result_host, atol=)`` judges each configuration's outputs (one local GPU only: the
    sweep measures in this process there, and CuPy arrays are used in place);
    ``iterations`` timed launches per configuration (the median); ``metrics`` strings (evaluated on the
    workers) or functions of a result (run here, after); ``strategy``/``strategy_options``
    (``max_fevals``, ``time_limit``) or ``budget``; ``cache`` a Kernel Tuner cache file the results are
    merged into, replayed without a GPU with ``simulation_mode=True``; ``default`` the baseline
    configuration (default: the first the restrictions allow). ``cluster``: None or ``"local"`` (this
    machine's GPUs), ``"slurm"``, a cluster config's path, or a Dask ``Client`` or cluster object.
    ``out``: the sweep folder (default ``results/<kernel_name>-<hash of the call's inputs>``: each
    different call its own folder, the same call again resumes it).
    ``train_models``: surrogate models trained on the rows; ``remeasure``: the pick timed against the default
    in interleaved rounds (each as ``launchtune sweep --train-models``, ``--remeasure``; off unless asked: the
    pick is the fastest configuration measured).
    """
    from launchtune import kernel_tuner_compat as kt
    from launchtune.checks import check_arguments
    from launchtune.kernels.kernel import live
    from launchtune.kernels.kernel.spec import kernel_defined
    from launchtune.pipeline.paths import check_slug, out_folder, results_root
    from launchtune.pipeline.store.ownership import claim

    given = dict(locals())
    check_arguments({k: v for k, v in given.items() if k not in ("kt",)})
    _refuse_keywords_without_meaning(given)
    observed = _observed(observers)  # Kernel Tuner's names of ours, in its units
    if smem_args is not None and (set(smem_args) != {"size"} or not isinstance(smem_args["size"], int | str)):
        _refuse("smem_args", "give {'size': bytes} as a number or an expression of the parameters")
    options = [compiler_options] if isinstance(compiler_options, str) else list(compiler_options or [])
    here = not simulation_mode and _measures_here(cluster)
    define_functions, define_flags = _defines(defines, here)
    options += define_flags
    geometry_functions = {
        name: value
        for name, value in zip(("grid_div_x", "grid_div_y", "grid_div_z", "problem_size"),
                               (grid_div_x, grid_div_y, grid_div_z, problem_size), strict=True)
        if callable(value)
    }  # fmt: skip
    if geometry_functions and not simulation_mode and not here:
        _refuse(next(iter(geometry_functions)), kt.GEOMETRY_ELSEWHERE)
    budget, max_minutes = _strategy_options(strategy_options, budget)
    strategy = _kt_strategy(strategy)
    if simulation_mode and cache is None:
        _refuse("simulation_mode", "replays a Kernel Tuner cache: give cache=FILE")
    if verify is not None and not simulation_mode and not here:
        _refuse("verify", kt.VERIFY_ELSEWHERE)
    if verify is not None and answer is not None and len(answer) != len(arguments):
        raise ValueError(
            f"answer: {len(answer)} entries for {len(arguments)} arguments (None where unchecked)"
        )

    if not callable(kernel_source):
        code = _source(kernel_source)
        if not kernel_defined(code, kernel_name):
            raise ValueError(f"kernel_name: no '__global__ ... {kernel_name}(' in the kernel source")
    dims = _dims(problem_size)
    blocks = list(block_size_names or ("block_size_x", "block_size_y", "block_size_z"))
    params = _tune_params(tune_params, blocks)
    functions, texts_metrics = _metrics(metrics, observed, params)
    goal = objective or "time"
    maximize = bool(objective_higher_is_better)
    if goal in functions and not (strategy is None or strategy in EXHAUSTIVE) and budget is None:
        _refuse(
            "objective",
            f"{goal!r} is a Python function run here after measuring, so a search cannot "
            "rank by it; write the metric as a string, or use strategy='brute_force'",
        )
    files = _Writer()
    texts, allowed, allowed_rows = _restrictions(restrictions, params, files)
    cache_path = _cache_file(cache)
    ok = _allows(params, texts, dims, blocks)
    if callable(kernel_source):
        code = _generated_source(kernel_source, params, ok, allowed_rows)
        if not kernel_defined(code, kernel_name):
            raise ValueError(f"kernel_name: no '__global__ ... {kernel_name}(' in the generated source")
    if simulation_mode:
        assert cache_path is not None
        return _replayed(cache_path, params, ok, allowed_rows, functions, goal, maximize)

    baseline = dict(default) if default is not None else _first_allowed(params, ok, allowed_rows)
    cached = _cached(cache_path, params, ok, allowed_rows, baseline)
    if cached:  # Kernel Tuner's resume: what the cache holds is not measured again (the baseline is)
        allowed = _resumed(cached, cache_path, params, ok, allowed_rows, baseline, files)
    device_arrays: dict[int, Any] | None = {} if here else None  # device arrays used in place, by position
    host_answer = [_host_array(a) for a in answer] if answer is not None else None
    kernel: dict[str, Any] = {
        "source": files.text("kernel.cu", code),
        "kernel_name": kernel_name,
        "problem_size": dims,
        "tune_params": params,
        "default": baseline,
        "arguments": _arguments(
            arguments,
            host_answer if verify is None else None,
            {k: _host_array(v) for k, v in (cmem_args or {}).items()},
            files,
            device_arrays,
            (host_answer or []) if verify is not None else None,
        ),
        "atol": float(atol),
    }
    _write_functions(files, verify, define_functions, geometry_functions)
    if texts:
        kernel["restrictions"] = texts
    if allowed:
        kernel["allowed"] = allowed
    if not geometry_functions:  # else the grid of each launch is the caller's (Attached.grid), not the spec's
        kernel.update(_grid_divisors((grid_div_x, grid_div_y, grid_div_z)))
    if block_size_names is not None:
        kernel["block_size_names"] = list(block_size_names)
    if options:
        kernel["compiler_options"] = options
    if smem_args is not None:
        kernel["shared_memory"] = smem_args["size"]
    if texts_metrics:
        kernel["metrics"] = {str(k): v for k, v in texts_metrics.items()}
    if objective is not None and objective not in functions:
        kernel["objective"] = {"maximize" if maximize else "minimize": objective}
    files.text("kernel.yaml", yaml.safe_dump(kernel, sort_keys=False, default_flow_style=None))

    name = check_slug(kernel_name, "kernel_name")
    digest = files.digest()
    folder = out_folder(Path(out), "out") if out is not None else results_root() / f"{name}-{digest[:8]}"
    inputs = folder / "inputs" / digest  # other kernel files, another folder and planning key
    sweep_spec = _sweep_spec(
        name, kernel_name, dims, inputs / "kernel.yaml", strategy=strategy, budget=budget,
        iterations=iterations, seed=seed, train_models=train_models, remeasure=remeasure,
    )  # fmt: skip
    files.text("sweep.yaml", yaml.safe_dump(sweep_spec, sort_keys=False, default_flow_style=None))
    if cache_path is not None:
        kt.read_cache(cache_path)  # a file that is not a cache: one line now, not after the sweep
    _check_gpu(cluster)

    claim(folder, "sweep", "out")  # a new or empty folder, or a sweep's: the inputs go inside it
    files.write(inputs)
    logger.info(f"tune_kernel {kernel_name}: inputs in {inputs}")
    attached = live.Attached(
        arrays=device_arrays or {},
        verify=verify,
        answer=None if host_answer is None else [None if a is None else np.asarray(a) for a in host_answer],
        atol=atol,
        defines=define_functions,
        measured=_cache_appender(cache_path, kernel_name, dims, params, goal, functions) if here else None,
        grid=kt.launch_grid(problem_size, (grid_div_x, grid_div_y, grid_div_z), blocks)
        if geometry_functions
        else None,
    )
    try:
        with live.attached(inputs / "kernel.yaml", attached):
            result = sweep(
                inputs / "sweep.yaml",
                cluster=cluster,
                out=folder,
                gpu_classes=gpu_classes,
                force=force,
                progress=progress if progress is not None else (True if verbose else None),
                max_minutes=max_minutes,
                allow_workload=[KERNEL_WORKLOAD] if ":" in KERNEL_WORKLOAD else (),
            )
    finally:
        if here:  # the workload built here holds the caller's arrays and functions: released with the call
            from launchtune.pipeline.sweep.worker import forget_workloads_of

            forget_workloads_of(inputs / "kernel.yaml")
    return _kernel_tuner_pair(result, params, texts_metrics, functions, dims, iterations, goal, maximize,
                              cache_path, kernel_name, quiet, cached)  # fmt: skip


def _write_functions(
    files: _Writer,
    verify: Callable[..., bool] | None,
    defines: Mapping[str, Callable[[dict[str, Any]], Any]],
    geometry: Mapping[str, Callable[..., Any]],
) -> None:
    """The caller's functions (``verify``, #define functions, grid divisors or problem size) written among
    the call's inputs as their source text: another function, another folder."""
    from launchtune.pipeline.paths import check_slug

    if verify is not None:
        files.text("verify.py", _function_text(verify))
    for key, function in defines.items():
        files.text(f"define_{check_slug(key, 'defines')}.py", _function_text(function))
    for name, function in geometry.items():
        files.text(f"{name}.py", _function_text(function))


def _grid_divisors(values: Sequence[Any]) -> dict[str, list[str]]:
    """``grid_div_x/y/z`` as the kernel spec's keys (those given; Kernel Tuner's ``[]``, nothing divides it:
    ``["1"]``)."""
    keys = {}
    for dim, value in zip("xyz", values, strict=True):
        divisors = _divisors(value, f"grid_div_{dim}")
        if divisors is not None:
            keys[f"grid_div_{dim}"] = divisors or ["1"]
    return keys


def _refuse_keywords_without_meaning(given: Mapping[str, Any]) -> None:
    """Kernel Tuner's keywords that have no meaning here (``kernel_tuner_compat.REFUSED``), another language
    than CUDA, a device or platform chosen by number: refused, one line each."""
    from launchtune import kernel_tuner_compat as kt

    for name, why in kt.REFUSED.items():
        if given[name] not in (None, False):
            _refuse(name, why)
    lang = given["lang"]
    if lang is not None and lang.upper() not in ("CUDA", "CUPY", "NVCUDA"):
        _refuse("lang", kt.OTHER_LANGS.format(lang=lang))
    if given["device"] != 0:
        _refuse(
            "device", "launchtune measures on each GPU of the cluster; choose one with CUDA_VISIBLE_DEVICES"
        )
    if given["platform"] != 0:
        _refuse("platform", "platforms are OpenCL's; launchtune runs CUDA")


def _observed(observers: Sequence[Any] | None) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """What Kernel Tuner's observers ask for, as our records' counterparts under Kernel Tuner's names and in
    its units: NVML's energy and power only; any other observable refused."""
    observed: dict[str, Callable[[dict[str, Any]], Any]] = {}
    for observer in observers or ():
        wanted = set(getattr(observer, "observables", None) or ()) | set(
            getattr(getattr(observer, "continuous_observer", None), "observables", None) or ()
        )
        other = sorted(wanted - set(NVML_OBSERVABLES)) or (
            [] if "NVML" in type(observer).__name__ else ["all"]
        )
        if other:
            _refuse(
                "observers",
                f"{type(observer).__name__} ({', '.join(other)}): only NVML's nvml_energy and nvml_power "
                "have a counterpart (recorded as energy_mJ and power_W wherever the GPU has the counter)",
            )
        observed.update({k: NVML_OBSERVABLES[k] for k in sorted(wanted)})
    return observed


def _defines(
    defines: Mapping[str, Any] | None, here: bool
) -> tuple[dict[str, Callable[[dict[str, Any]], Any]], list[str]]:
    """``defines`` as the caller's functions of a configuration (only where this process measures: ``here``)
    and ``-Dkey=value`` compiler flags for the rest."""
    functions: dict[str, Callable[[dict[str, Any]], Any]] = {}
    flags: list[str] = []
    for key, value in (defines or {}).items():
        if callable(value) and not here:
            _refuse(
                "defines",
                f"{key!r}: a function runs only where one local GPU measures in this process (cluster=None, "
                "one GPU visible); give a value or an expression in the source",
            )
        if callable(value):
            functions[str(key)] = value
        else:
            flags.append(f"-D{key}={value}")
    return functions, flags


def _strategy_options(
    options: Mapping[str, Any] | None, budget: int | None
) -> tuple[int | None, float | None]:
    """Kernel Tuner's ``strategy_options`` as the budget (``max_fevals``, where ``budget`` is not given) and
    the minutes allowed (``time_limit``, seconds); any other option refused."""
    from launchtune.checks import check_arguments

    max_minutes = None
    for key, value in (options or {}).items():
        if key == "max_fevals" and budget is None:
            check_arguments({"budget": value})
            budget = int(value)
        elif key == "time_limit":
            check_arguments({"max_minutes": value})
            max_minutes = float(value) / 60
        elif key != "max_fevals":
            _refuse(
                "strategy_options",
                f"{key!r}: launchtune's strategies take max_fevals and time_limit; "
                "each has its own defaults (launchtune strategies --list)",
            )
    return budget, max_minutes


def _dims(problem_size: Any) -> list[Any]:
    """The problem size as the kernel spec's dimensions: numbers, expressions of the parameters (strings), or
    a placeholder where the grid is the caller's function's."""
    if callable(
        problem_size
    ):  # the grid is the caller's function's (Attached.grid); the spec's size a placeholder
        return [1]
    if isinstance(problem_size, str):
        return [problem_size]
    if isinstance(problem_size, Sequence) and any(isinstance(d, str) for d in problem_size):
        return [d if isinstance(d, str) else int(d) for d in problem_size]
    return _problem_size(problem_size)


def _metrics(
    metrics: Mapping[str, Any] | None,
    observed: Mapping[str, Callable[[dict[str, Any]], Any]],
    params: Mapping[str, list[Any]],
) -> tuple[dict[str, Callable[[dict[str, Any]], Any]], dict[str, str]]:
    """The metrics computed here after measuring (functions, the observers', strings whose names the spec
    cannot hold) and those the spec states (expression strings named by identifiers, run on the workers)."""
    functions = {**observed, **{k: v for k, v in (metrics or {}).items() if callable(v)}}
    texts = {k: v for k, v in (metrics or {}).items() if not callable(v)}
    if not all(isinstance(v, str) for v in texts.values()):
        raise TypeError("metrics: expected a dict of name to an expression string or a function of a result")
    for key in [k for k in texts if not k.isidentifier()]:  # "GB/s": no name the spec can hold
        functions[key] = _metric_here(key, texts.pop(key), [*params, "time", *metrics_names(metrics)])
    return functions, texts


def _cache_file(cache: str | Path | None) -> Path | None:
    """The Kernel Tuner cache file, ``.json`` added as Kernel Tuner adds it."""
    if cache is None:
        return None
    path = Path(cache).expanduser()
    return path if path.name.endswith(".json") else path.with_name(path.name + ".json")


def _replayed(
    cache_path: Path,
    params: dict[str, list[Any]],
    ok: Callable[[dict[str, Any]], bool],
    allowed_rows: list[Any] | None,
    functions: Mapping[str, Callable[[dict[str, Any]], Any]],
    goal: str,
    maximize: bool,
) -> Any:
    """``simulation_mode``: the cache's results for the configurations this call allows, as Kernel Tuner
    returns them, measuring nothing."""
    from launchtune import kernel_tuner_compat as kt

    allowed_set = {tuple(r) for r in allowed_rows} if allowed_rows is not None else None
    results, env = kt.replay(
        cache_path, params,
        lambda c: ok(c) and (allowed_set is None or tuple(c[n] for n in params) in allowed_set),
    )  # fmt: skip
    kt.apply_metrics(results, functions)
    env["best_config"] = kt.best_of(results, goal, maximize)
    return kt.TuneResult(results, env, None)


def _resumed(
    cached: list[dict[str, Any]],
    cache_path: Path | None,
    params: dict[str, list[Any]],
    ok: Callable[[dict[str, Any]], bool],
    allowed_rows: list[Any] | None,
    baseline: dict[str, Any],
    files: _Writer,
) -> str:
    """Kernel Tuner's resume: the allowed configurations the cache does not hold (and the baseline, measured
    again), written as the spec's ``allowed`` file in place of the restrictions' one; its name."""
    done = {tuple(e[n] for n in params) for e in cached}
    names = list(params)
    candidates = allowed_rows if allowed_rows is not None else itertools.product(*params.values())
    remaining = [
        c for c in candidates
        if ok(dict(zip(names, c, strict=True)))
        and (tuple(c) not in done or dict(zip(names, c, strict=True)) == baseline)
    ]  # fmt: skip
    files.files.pop("allowed.npy", None)
    allowed = _allowed_file(files, params, remaining)
    logger.info(f"cache: {len(cached)} configurations from {cache_path}, {len(remaining)} to measure")
    return allowed


def _sweep_spec(
    name: str,
    kernel_name: str,
    dims: list[Any],
    kernel_yaml: Path,
    *,
    strategy: str | None,
    budget: int | None,
    iterations: int,
    seed: int | None,
    train_models: bool,
    remeasure: bool,
) -> dict[str, Any]:
    """The sweep spec the call amounts to: every allowed configuration (or ``budget`` of them at random),
    or a search by ``strategy``, of the kernel spec at ``kernel_yaml``."""
    exhaustive = strategy is None or strategy in EXHAUSTIVE
    spec: dict[str, Any] = {
        "name": name,
        "description": f"tune_kernel({kernel_name!r}) from Python",
        "workload": KERNEL_WORKLOAD,
        "case": name,
        "size": "x".join(str(d) if isinstance(d, int) else "1" for d in dims),  # an expression: per launch
        "backend": "auto",
        "options": {"spec": str(kernel_yaml)},
        "samplers": ["exhaustive"] if exhaustive and budget is None else ["random"],
        "samples": budget if exhaustive and budget is not None else 0,
        "repeats": iterations,
        "batch_size": "auto",
        "seed": seed or 0,
        "train_models": bool(train_models),
        "remeasure": bool(remeasure),
    }
    if not exhaustive:  # without a budget, the spec's default (store.spec.DEFAULT_BUDGET)
        spec["search"] = {"strategy": strategy, **({"budget": budget} if budget is not None else {})}
    return spec


def _cache_appender(
    path: Path | None,
    kernel_name: str,
    dims: list[Any],
    params: dict[str, list[Any]],
    goal: str,
    functions: Mapping[str, Callable[[dict[str, Any]], Any]],
) -> Callable[[dict[str, Any], dict[str, Any]], None] | None:
    """Kernel Tuner's cache appended as each configuration is measured in this process (the workload calls
    this with the configuration's values and what it measured, ``kernels.kernel.live``); None without a
    cache. After the sweep, :func:`_kernel_tuner_pair` merges every row into it and closes it."""
    from launchtune import kernel_tuner_compat as kt
    from launchtune.kernels.device import visible_gpu_names

    if path is None:
        return None
    names = visible_gpu_names()
    header = {"device_name": names[0] if names else "", "kernel_name": kernel_name, "problem_size": dims,
              "tune_params_keys": list(params), "tune_params": params, "objective": goal}  # fmt: skip
    appender = kt.CacheAppender(path, header)

    def measured(config: dict[str, Any], what: dict[str, Any]) -> None:
        entry: dict[str, Any] = dict(config)
        if "error" in what:
            failed = (
                "CompilationFailedConfig" if what["error"].startswith("compile error") else "InvalidConfig"
            )
            entry.update(time=kt.error_config(failed), compile_time=0.0, benchmark_time=0.0)
        else:
            times = [float(t) for t in what["times"]]
            entry.update(time=float(what["time"]), times=times, compile_time=float(what["compile_ms"]),
                         benchmark_time=sum(times))  # fmt: skip
            entry.update({k: v for k, v in (what.get("metrics") or {}).items() if v is not None})
            kt.apply_metrics([entry], functions)
        entry.update(framework_time=0.0, strategy_time=0.0, verification_time=0.0)
        appender.append(entry)

    return measured


def _kernel_tuner_pair(
    result: Result,
    params: dict[str, list[Any]],
    texts_metrics: Mapping[str, str],
    functions: Mapping[str, Callable[[dict[str, Any]], Any]],
    dims: list[Any],
    iterations: int,
    goal: str,
    maximize: bool,
    cache_path: Path | None,
    kernel_name: str,
    quiet: bool,
    cached: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> Any:
    """The sweep's rows of its first GPU class as Kernel Tuner's ``(results, env)``, after the ``cached``
    results (a resumed cache's) it did not measure again; the cache merged."""
    from launchtune import kernel_tuner_compat as kt
    from launchtune.kernels.kernel.fields import is_whole

    rows = result.rows
    if len(rows) and "gpu_class" in rows:
        rows = rows[rows["gpu_class"] == sorted(set(rows["gpu_class"]))[0]]
    labels = {n: tuple(v) for n, v in params.items() if not is_whole(v)}
    measured = kt.results_from_rows(rows, params, texts_metrics, labels)
    seen = {kt.cache_key(r, params) for r in measured}
    results = [dict(r) for r in cached if kt.cache_key(r, params) not in seen] + measured
    kt.apply_metrics(results, functions)
    for entry in results:
        if goal not in entry and isinstance(entry.get("time"), float) and goal == "time":
            entry[goal] = entry["time"]
    best = kt.best_of(results, goal, maximize)
    env = kt.environment(rows, dims if len(dims) > 1 else dims[0], iterations, goal, best)
    if cache_path is not None:
        header = {"device_name": env["device_name"], "kernel_name": kernel_name, "problem_size": dims,
                  "tune_params_keys": list(params), "tune_params": params, "objective": goal}  # fmt: skip
        kt.write_cache(cache_path, header, results)
    if not quiet and best is not None:
        print(f"best performing configuration for {goal}: " + ", ".join(f"{k}={v}" for k, v in best.items()
              if k in params or k == goal))  # fmt: skip
    return kt.TuneResult(results, env, result)


def run_kernel(
    kernel_name: str,
    kernel_source: str | Path,
    problem_size: Any,
    arguments: Sequence[Any],
    params: Mapping[str, Any],
    grid_div_x: Any = None,
    grid_div_y: Any = None,
    grid_div_z: Any = None,
    lang: str | None = None,
    device: int = 0,
    platform: int = 0,
    smem_args: Mapping[str, Any] | None = None,
    cmem_args: Mapping[str, Any] | None = None,
    texmem_args: Mapping[str, Any] | None = None,
    compiler: Any = None,
    compiler_options: str | Sequence[str] | None = None,
    defines: Mapping[str, Any] | None = None,
    block_size_names: Sequence[str] | None = None,
    quiet: bool = False,
    log: Any = None,
) -> list[Any]:
    """Kernel Tuner's ``run_kernel``: compile ``kernel_name`` with ``params`` as ``#define``s, launch it
    once on this machine's first GPU and return ``arguments`` after the launch (arrays as numpy; CuPy
    arrays are used in place, on the device). Nothing is written."""
    from launchtune import kernel_tuner_compat as kt
    from launchtune.checks import check_arguments
    from launchtune.kernels.kernel.compile import build_function, source_with_defines
    from launchtune.kernels.kernel.spec import kernel_defined

    given = dict(locals())
    check_arguments({k: v for k, v in given.items() if k != "kt"})
    for name in ("texmem_args", "compiler", "log"):
        if given[name] is not None:
            _refuse(name, kt.REFUSED[name])
    if lang is not None and lang.upper() not in ("CUDA", "CUPY", "NVCUDA"):
        _refuse("lang", kt.OTHER_LANGS.format(lang=lang))
    if device != 0 or platform != 0:
        _refuse("device", "run_kernel launches on the first GPU; choose it with CUDA_VISIBLE_DEVICES")
    code = _source(kernel_source)
    if not kernel_defined(code, kernel_name):
        raise ValueError(f"kernel_name: no '__global__ ... {kernel_name}(' in the kernel source")
    names = list(block_size_names or ("block_size_x", "block_size_y", "block_size_z"))
    values = {str(k): (v.item() if isinstance(v, np.generic) else v) for k, v in params.items()}
    block = tuple(int(values.get(n, 256 if i == 0 else 1)) for i, n in enumerate(names))
    known = {**values, **dict(zip(names, block, strict=True))}
    grid = kt.launch_grid(problem_size, (grid_div_x, grid_div_y, grid_div_z), names)(known)
    macros = {**known, **{f"grid_size_{d}": g for d, g in zip("xyz", grid, strict=True)}, "kernel_tuner": 1}
    options = [compiler_options] if isinstance(compiler_options, str) else list(compiler_options or [])
    options += [f"-D{k}={v}" for k, v in (defines or {}).items()]
    _check_gpu(None)
    import cupy as cp

    module, function = build_function(cp, source_with_defines(code, macros), options, kernel_name)
    device_args = [cp.asarray(a) if isinstance(a, np.ndarray) else a for a in arguments]
    for symbol, array in (cmem_args or {}).items():
        host = np.ascontiguousarray(_host_array(array))
        cp.ndarray(host.shape, host.dtype, module.get_global(symbol)).set(host)
    shared = int(smem_args["size"]) if smem_args else 0
    function(tuple(grid), block, tuple(device_args), shared_mem=shared)
    cp.cuda.Device().synchronize()
    return [a.get() if hasattr(a, "__cuda_array_interface__") else a for a in device_args]
