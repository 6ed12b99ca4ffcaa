"""What ``launchtune.tune_kernel`` returns and reads in Kernel Tuner's terms: the ``(results, env)`` pair
(:class:`TuneResult`), Kernel Tuner cache files in its own layout (``cache=``: read to resume, appended as
each configuration is measured where one local device measures in the caller's process, merged and closed
after the sweep; ``simulation_mode``: replayed without a GPU), and the one-line refusals of Kernel Tuner's
keywords that have no meaning here.

Kernel Tuner's results list holds one dict per measured configuration: each parameter, ``time`` (ms, the
median here), ``times`` (the timed launches, where recorded), each metric and the objective, and Kernel
Tuner's bookkeeping (``compile_time``, ``benchmark_time``; ``framework_time``, ``strategy_time`` and
``verification_time`` 0, not measured here); a configuration that failed has ``time`` and ``__error__``
``InvalidConfig``, ``CompilationFailedConfig`` or ``RuntimeFailedConfig`` (Kernel Tuner's classes where it
is installed, else the names as text)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# Kernel Tuner's names of a failed configuration, by our row status
FAILED_NAMES = {
    "invalid": "InvalidConfig",
    "failed": "RuntimeFailedConfig",
    "compile": "CompilationFailedConfig",
}
# Kernel Tuner 1.5's keywords that have no counterpart here, and what to write instead
REFUSED = {
    "texmem_args": "texture memory is not bound here (NVRTC through CuPy); pass the array as an argument",
    "compiler": "kernels compile with NVRTC through CuPy; give its options as compiler_options=",
    "log": "launchtune logs through Python's logging (the 'launchtune' logger): use logging.basicConfig",
    "parallel": "launchtune already measures on a worker per GPU; give cluster= for more GPUs",
    "objectives": "one objective per call: objective= and objective_higher_is_better=",
}
# verify= where the sweep measures on workers of other processes
VERIFY_ELSEWHERE = (
    "a Python function runs only where one local GPU measures in this process (cluster=None, one GPU "
    "visible); a cluster's workers are other processes: give answer= and atol=, or tune on one local GPU"
)
# grid_div_* or problem_size as functions where the sweep measures on workers of other processes
GEOMETRY_ELSEWHERE = (
    "a function runs only where one local GPU measures in this process (cluster=None, one GPU visible), "
    "as verify= does; on a cluster give the parameter names or expressions that divide the problem size "
    "(['block_size_x', 'tile_size_x']) and numbers or expressions as the problem size"
)
MAX_CACHE_BYTES = 1 << 30  # a cache file read at most (Kernel Tuner's of a large space are hundreds of MB)
OTHER_LANGS = "launchtune compiles CUDA (lang='CUDA', 'CUPY' or 'NVCUDA'); use Kernel Tuner itself for {lang}"


class TuneResult(tuple):  # noqa: SLOT001  (a tuple of two that also carries the sweep folder's Result)
    """``(results, env)`` as Kernel Tuner returns them, so ``results, env = tune_kernel(...)`` and
    ``json.dump(tune_kernel(...), f)`` work unchanged; the attributes are the sweep folder's
    :class:`launchtune.api.Result` (``rows``, ``best``, ``folder``, ``to_kernel_tuner_cache``, ...), also
    as ``.result``. ``None`` there after a ``simulation_mode`` replay, which has no folder."""

    result: Any

    def __new__(cls, results: list[dict[str, Any]], env: dict[str, Any], result: Any) -> TuneResult:
        self = super().__new__(cls, (results, env))
        self.result = result
        return self

    @property
    def results(self) -> list[dict[str, Any]]:
        return self[0]

    @property
    def env(self) -> dict[str, Any]:
        return self[1]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "result":
            raise AttributeError(name)
        if self.result is None:
            raise AttributeError(f"{name}: a simulation_mode replay has no sweep folder (only results, env)")
        return getattr(self.result, name)

    def __getnewargs__(self) -> tuple[Any, ...]:  # pickling: the two and the result
        return (self[0], self[1], self.result)

    def __repr__(self) -> str:
        return f"TuneResult({len(self[0])} results, best {self[1].get('best_config')!r}, {self.result!r})"


def launch_grid(
    problem_size: Any, divisors: Sequence[Any], block_names: Sequence[str]
) -> Callable[[Mapping[str, Any]], tuple[int, int, int]]:
    """Kernel Tuner's grid of a configuration (its ``util.get_problem_size`` and ``get_grid_dimensions``):
    the problem size (numbers, expressions of the parameters, or a function of the configuration returning
    either), each dimension divided by its ``grid_div`` (None: that dimension's block size, else 1; a
    function of the configuration; a name, an expression or a number; a list of them multiplied, ``[]`` 1),
    rounded up. Strings are the kernel spec's expressions, not Python's ``eval``. The caller's functions run
    here, in its process; one that raises or returns no positive whole number is an ``ExpressionError``
    naming the field, which makes that configuration an invalid row."""
    from launchtune.kernels.kernel.expressions import ExpressionError, parse

    def number(item: Any, config: Mapping[str, Any], where: str) -> int:
        try:
            value = item(dict(config)) if callable(item) else item
            if isinstance(value, str):
                value = parse(value, list(config), where)(dict(config))
            whole = int(value)
        except ExpressionError:
            raise
        except Exception as exc:  # noqa: BLE001  (the caller's function: any error is this configuration's)
            raise ExpressionError(f"{where}: {type(exc).__name__}: {exc} for {dict(config)}") from None
        if whole != value or whole < 1:
            raise ExpressionError(f"{where}: {value!r} for {dict(config)} (a positive whole number)")
        return whole

    def grid(config: Mapping[str, Any]) -> tuple[int, int, int]:
        size = problem_size
        if callable(size):
            try:
                size = size(dict(config))
            except Exception as exc:  # noqa: BLE001  (as above)
                why = f"{type(exc).__name__}: {exc}"
                raise ExpressionError(f"problem_size: {why} for {dict(config)}") from None
        dims = [size] if isinstance(size, int | str) or hasattr(size, "__index__") else list(size)
        dims = [number(d, config, "problem_size") for d in dims] + [1] * (3 - len(dims))
        out = []
        for i, divs in enumerate(divisors):
            where = f"grid_div_{'xyz'[i]}"
            if divs is None:
                divisor = int(config.get(block_names[i], 1))
            elif callable(divs) or isinstance(divs, int | str):
                divisor = number(divs, config, where)
            else:
                divisor = math.prod(number(d, config, where) for d in divs)
            out.append(-(-dims[i] // divisor))
        return (out[0], out[1], out[2])

    return grid


def error_config(name: str) -> str:
    """Kernel Tuner's error value of a failed configuration: its own class where Kernel Tuner is installed
    (its ``store_output_file`` tells them apart by class), else the name as text; either way the text is
    the name."""
    try:
        from kernel_tuner import util
    except ImportError:
        return name
    return getattr(util, name)(name)


def apply_metrics(
    results: list[dict[str, Any]], functions: Mapping[str, Callable[[dict[str, Any]], Any]]
) -> None:
    """Kernel Tuner's metrics given as Python functions, run here (the caller's code) on each measured
    result in order, so a later metric reads an earlier one; a failed configuration gets none."""
    for entry in results:
        if not isinstance(entry.get("time"), float):
            continue
        for name, function in functions.items():
            entry[name] = function(entry)


def best_of(results: list[dict[str, Any]], objective: str, maximize: bool) -> dict[str, Any] | None:
    """The best measured result by ``objective`` (Kernel Tuner's ``env['best_config']``)."""
    ok = [r for r in results if isinstance(r.get(objective), int | float) and math.isfinite(r[objective])]
    if not ok:
        return None
    return (max if maximize else min)(ok, key=lambda r: r[objective])


def results_from_rows(
    rows: Any, params: Iterable[str], metric_names: Iterable[str], labels: Mapping[str, tuple[Any, ...]]
) -> list[dict[str, Any]]:
    """Kernel Tuner's results list from a sweep's rows (a DataFrame, one GPU class)."""
    names = list(params)
    metrics = list(metric_names)
    times = next((c for c in ("total_times", "times") if c in rows.columns), None)
    out: list[dict[str, Any]] = []
    for row in rows.to_dict("records"):
        entry: dict[str, Any] = {}
        for n in names:
            value = row[n]
            value = value.item() if hasattr(value, "item") else value
            entry[n] = labels[n][int(value)] if n in labels else value
        status = str(row.get("status"))
        compile_ms = row.get("compile_ms")
        entry["compile_time"] = (
            float(compile_ms) if compile_ms is not None and compile_ms == compile_ms else 0.0
        )
        for key in ("framework_time", "strategy_time", "verification_time"):  # not measured here
            entry[key] = 0.0
        if row.get("timestamp") is not None and hasattr(row["timestamp"], "isoformat"):
            entry["timestamp"] = row["timestamp"].isoformat()
        if status == "ok":
            entry["time"] = float(row["total_ms"])
            if times is not None and row.get(times) is not None:
                entry["times"] = [float(t) for t in row[times]]
            repeats = row.get("repeats")
            entry["benchmark_time"] = (
                sum(entry["times"]) if "times" in entry else entry["time"] * (int(repeats) if repeats else 1)
            )
            for m in metrics:
                value = row.get(f"metric.{m}")
                if value is not None and math.isfinite(float(value)):
                    entry[m] = float(value)
            for key in ("energy_mJ", "power_W"):
                if row.get(key) is not None and math.isfinite(float(row[key])):
                    entry[key] = float(row[key])
        else:
            entry["time"] = entry["__error__"] = error_config(FAILED_NAMES.get(status, "RuntimeFailedConfig"))
            entry["benchmark_time"] = 0.0
        out.append(entry)
    return out


def environment(rows: Any, problem_size: Any, iterations: int, objective: str, best: Any) -> dict[str, Any]:
    """Kernel Tuner's ``env``: where and how it was measured, and the best configuration."""
    first = rows.iloc[0] if len(rows) else {}
    return {
        "device_name": str(first.get("device_name", "")) if len(rows) else "",
        "problem_size": problem_size,
        "iterations": iterations,
        "objective": objective,
        "gpu_class": str(first.get("gpu_class", "")) if len(rows) else "",
        "best_config": best,
    }


def read_cache(path: Path) -> dict[str, Any] | None:
    """A Kernel Tuner cache file (``.json``; Kernel Tuner leaves it unclosed while tuning, so a missing
    final ``}}`` is accepted as it does); None where there is no file."""
    from launchtune.kernels.files import read_regular

    raw = read_regular(path, "Kernel Tuner cache", max_bytes=MAX_CACHE_BYTES, missing_ok=True)
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace").strip()
    if text.endswith(","):
        text = text[:-1]
    try:
        data = json.loads(text if text.endswith("}}") else text + "}}")
    except json.JSONDecodeError:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"cache: {path} is not a Kernel Tuner cache ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cache"), dict):
        raise ValueError(f"cache: {path} is not a Kernel Tuner cache (no 'cache' mapping)")
    return data


def cache_key(config: Mapping[str, Any], names: Iterable[str]) -> str:
    return ",".join(str(config[n]) for n in names)


def _plain(value: Any) -> Any:
    """JSON for what ``json`` does not know: a numpy number as its value, anything else (Kernel Tuner's
    error classes) as its text, as Kernel Tuner's own encoder writes them."""
    return value.item() if hasattr(value, "item") else str(value)


def _entry_line(key: str, entry: Mapping[str, Any]) -> str:
    """One cache entry as Kernel Tuner appends it: a line ``"key": {...},``."""
    return "\n" + json.dumps({key: entry}, default=_plain)[1:-1] + ","


def _layout(data: Mapping[str, Any], closed: bool) -> str:
    """A cache in Kernel Tuner's own layout (its ``process_cache``, ``store_cache``, ``close_cache``): the
    header, then one line per entry; open (ending in ``,``, as while tuning) or closed. Kernel Tuner reopens
    a closed file by cutting its last three characters, which is only right in this layout."""
    header = {k: v for k, v in data.items() if k != "cache"}
    text = json.dumps({**header, "cache": {}}, indent="", default=_plain)[:-3]  # without the last "}\n}"
    text += "".join(_entry_line(k, e) for k, e in data["cache"].items())
    if closed:
        text = (text[:-1] if text.endswith(",") else text) + "}\n}"
    return text


def _write(path: Path, text: str) -> None:
    from launchtune.kernels.atomic import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)


def write_cache(path: Path, header: dict[str, Any], results: list[dict[str, Any]]) -> None:
    """Merge ``results`` into the Kernel Tuner cache at ``path`` (what it held is kept) and close it,
    atomically, in Kernel Tuner's layout."""
    names = list(header["tune_params_keys"])
    data = read_cache(path) or {**header, "cache": {}}
    if not data.get("device_name"):
        data["device_name"] = header.get("device_name", "")
    for entry in results:
        key = cache_key(entry, names)
        old = data["cache"].get(key)  # the same measurement appended while tuning keeps what it had more
        same = isinstance(old, dict) and old.get("time") == entry.get("time")
        data["cache"][key] = {**old, **entry} if same else entry
    _write(path, _layout(data, closed=True))


class CacheAppender:
    """Kernel Tuner's cache while tuning: the file opened (made, or a closed one reopened) at the first
    entry, then each entry appended as one line, as Kernel Tuner's ``store_cache`` does; a run stopped
    half-way leaves a file Kernel Tuner and :func:`read_cache` resume from."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path, self.header, self.opened = path, header, False

    def append(self, entry: Mapping[str, Any]) -> None:
        if not self.opened:
            data = read_cache(self.path) or {**self.header, "cache": {}}
            _write(self.path, _layout(data, closed=False))
            self.opened = True
        with self.path.open("a", encoding="utf-8") as f:
            f.write(_entry_line(cache_key(entry, self.header["tune_params_keys"]), entry))


def cached_results(
    data: Mapping[str, Any], tune_params: Mapping[str, list[Any]], allowed: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]]:
    """The cache's entries for the configurations of ``tune_params`` that ``allowed`` keeps, in its order."""
    names = list(tune_params)
    results = []
    for entry in data["cache"].values():
        if not isinstance(entry, dict) or any(n not in entry for n in names):
            continue
        config = {n: entry[n] for n in names}
        if all(config[n] in tune_params[n] for n in names) and allowed(config):
            results.append(dict(entry))
    return results


def replay(
    path: Path, tune_params: Mapping[str, list[Any]], allowed: Callable[[dict[str, Any]], bool]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``simulation_mode``: the cache's results for the configurations of ``tune_params`` that ``allowed``
    keeps, in the cache's order, and its header as ``env``; nothing is measured or written."""
    data = read_cache(path)
    if data is None:
        raise FileNotFoundError(
            f"cache: simulation_mode replays a Kernel Tuner cache, and {path} does not exist"
        )
    results = cached_results(data, tune_params, allowed)
    if not results:
        raise ValueError(f"cache: {path} holds no configuration of these tune_params (simulation_mode)")
    env = {k: v for k, v in data.items() if k != "cache"}
    env["simulation"] = True
    return results, env
