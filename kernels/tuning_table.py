"""The tuning table, ``tuning_table.json``: ranked configurations per (GPU class, problem size), as JSON.

The one owner of the file: its name (:data:`FILE_NAME`), its shape (:class:`TableDoc` of
:class:`TableEntry` rows, checked by :func:`read`), the one reader (:func:`read`), the one writer
(:func:`write`) and the picks (:func:`best_for` per GPU class, :func:`table_seeds` per GPU class and size,
each with the entry's objective). Every user goes through it: a sweep's report writes it, ``launchtune export
--format c-header`` and :func:`~launchtune.kernels.kernel.pick.pick_for_device` read its best per class, and
every run-time tuning (``autotune``, the CFD solver's kernels, its fused step) reads its seeds and writes
its own table back.

Two producers write it: a tuned run (``source: "runtime"``, measured in a real run on that GPU class and size:
the next run locks to it without scanning) and a sweep's report (``source`` anything else, e.g. ``"sweep"`` or
``"surrogate"``: a ranked short list the next run scans instead of the whole space). An entry::

    {"format": "launchtune-tuning-table", "version": 1,
     "entries": [{"gpu_class": "h100", "size": "3328x1024", "source": "runtime",
                  "best": {"xi_flux.blocks": 400, "xi_flux.threads": 128},
                  "candidates": [{"config": {...}, "time_ms": 0.131}, ...]}, ...]}

A sweep report's entry (``pipeline/results/report.py``) also has ``best_ms``, ``default``, ``default_ms``,
``objective`` (what its milliseconds are: the objective's cost, lower is better) and ``per_kernel`` (kernel ->
ranked ``{"xi_flux.blocks": 400, "xi_flux.threads": 128, "ms": ...}``), and ``configs`` or ``config`` may list
more; an older tuned run's entry names its ``kernel`` with ``candidates`` of ``blocks`` and ``threads``.
:class:`TuningTable` is the per-kernel view, each entry's blocks and threads checked on load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict, overload

from . import files
from .atomic import write_text
from .files import DuplicateKey, loads_json

FILE_NAME = "tuning_table.json"  # in a sweep folder, and beside a tuned run's launches.csv
FORMAT = "launchtune-tuning-table"
VERSION = 1
RUNTIME = "runtime"

# Bounds checked on load, so an absurd entry (threads 0, blocks -1 or 1e30, size 0x0) is refused with one line
# naming the file and entry, and never locked, used or written back by a tuned run. Threads: CUDA's limit per
# block on every GPU we target (a kernel's own, often lower, limit is in its launch space's constraints);
# blocks: CUDA's grid limit in x.
MAX_THREADS = 1024
MAX_BLOCKS = 2**31 - 1
MAX_DEPTH = 16  # the deepest a table nests is 6 (entries, entry, per_kernel, kernel, list, item)
MAX_BYTES = 64 * 2**20  # a table is kilobytes; a huge file is a mistake, not a table


class TableEntry(TypedDict, total=False):
    """One row of the table: one GPU class at one problem size. :func:`read` checks the types of the fields
    below where present; the picks check what they use (``gpu_class`` and ``size`` for a run-time tuning)."""

    gpu_class: str
    size: str
    source: str  # "runtime" (a tuned run: locked at once), else a sweep's ("sweep", "surrogate")
    workload: str
    case: str
    best: dict[str, int] | None
    best_ms: float | None  # the objective's cost of ``best`` (lower is better; time in ms by default)
    default: dict[str, int] | None
    default_ms: float | None
    # ranked, best first: {"config": {...}, "ms" or "time_ms": ...}; an older kernel entry's launches
    candidates: list[Any]
    per_kernel: dict[str, list[dict[str, Any]]]
    objective: dict[str, str]  # {"minimize": "time"} where none is stated
    kernel: str  # an older tuned run's entry: one kernel's ranked blocks and threads


class TableDoc(TypedDict, total=False):
    """The whole file: ``format``, ``version``, where it came from (a report's ``created``, ``sweep_id``)
    and its entries."""

    format: str
    version: int
    created: str
    sweep_id: str
    entries: list[TableEntry]


class TableError(ValueError):
    """A tuning table that cannot be read; the message names the file and the field."""


@dataclass
class Entry:
    gpu_class: str
    size: str
    kernel: str
    candidates: list[dict[str, float]]  # best first; each has "blocks", "threads" and maybe "time_ms"
    source: str = "sweep"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def params(self) -> list[tuple[int, int]]:
        return [(int(c["blocks"]), int(c["threads"])) for c in self.candidates]

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_class": self.gpu_class,
            "size": self.size,
            "kernel": self.kernel,
            "source": self.source,
            "candidates": self.candidates,
            **self.extra,
        }


def size_key(size: str | Sequence[int]) -> str:
    """``(3328, 1024)`` or ``"3328x1024"`` -> ``"3328x1024"``."""
    if isinstance(size, str):
        return size.strip().lower()
    return "x".join(str(int(n)) for n in size)


def _cells(size: str) -> float:
    try:
        return float(math.prod(int(n) for n in size.split("x")))
    except ValueError:
        return math.nan


class TuningTable:
    """A table's per-kernel view, every entry checked on load (blocks and threads within CUDA's bounds):
    entries keyed by (GPU class, size, kernel); a later ``add`` of the same key replaces the earlier one. A
    tuning reads a table's picks through :func:`table_seeds`."""

    def __init__(self, entries: Iterable[Entry] = ()):
        self._entries: dict[tuple[str, str, str], Entry] = {}
        for e in entries:
            self.add(e)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[Entry]:
        return list(self._entries.values())

    def add(self, entry: Entry) -> None:
        self._entries[(entry.gpu_class, entry.size, entry.kernel)] = entry

    # --- files --------------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path) -> TuningTable:
        path = Path(path)
        doc = read(path)
        table = cls()
        for i, raw in enumerate(doc["entries"]):
            for entry in _parse_entry(raw, f"{path}: entries[{i}]"):
                table.add(entry)
        return table

    def save(self, path: str | Path) -> Path:
        """Write atomically: a temporary file renamed over the target."""
        return write(path, new_doc(e.to_json() for e in self.entries))


@overload
def read(path: str | Path, missing_ok: Literal[False] = False) -> TableDoc: ...
@overload
def read(path: str | Path, missing_ok: bool) -> TableDoc | None: ...
def read(path: str | Path, missing_ok: bool = False) -> TableDoc | None:
    """The one reader: a tuning table file's JSON, its size, depth and shape checked (:func:`check_doc`),
    one line per problem naming the file (:class:`TableError`); None where there is none and
    ``missing_ok``. Read through ``kernels.files``: a FIFO, a device or a directory in its place is refused,
    never waited on."""
    path = Path(path)
    try:
        raw = files.read_regular(path, "tuning table", MAX_BYTES, missing_ok=True)
    except files.FileRefused as exc:
        raise TableError(str(exc)) from None
    if raw is None:
        if missing_ok:
            return None
        raise TableError(f"{path}: tuning table not found")
    try:
        doc = loads_json(raw)
    except DuplicateKey as exc:
        raise TableError(f"{path}: tuning table: {exc}") from None
    except RecursionError:
        raise TableError(f"{path}: nested deeper than a tuning table (at most {MAX_DEPTH} levels)") from None
    except ValueError as exc:  # not UTF-8, not JSON
        raise TableError(f"{path}: not a readable JSON tuning table ({exc})") from None
    if _depth(doc) > MAX_DEPTH:
        raise TableError(f"{path}: nested deeper than a tuning table (at most {MAX_DEPTH} levels)")
    check_doc(doc, path)
    return doc  # its shape checked just above (check_doc)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_doc(doc: Any, path: str | Path) -> None:
    """The table's schema (:class:`TableDoc`): ``entries`` a list of objects; where present, ``format`` a
    string, ``version`` an integer, and per entry ``gpu_class`` a string, ``best`` and ``default`` null or
    an object of integers, ``best_ms`` and ``default_ms`` null or a finite number >= 0, ``per_kernel`` an
    object. Fields it does not name may be added freely (older and newer tables stay readable)."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("entries"), list):
        raise TableError(f"{path}: field 'entries' (a list) is missing")
    if "format" in doc and not isinstance(doc["format"], str):
        raise TableError(f"{path}: format: must be a string, not {_short(doc['format'])}")
    if "version" in doc and not _is_int(doc["version"]):
        raise TableError(f"{path}: version: must be an integer, not {_short(doc['version'])}")
    for i, entry in enumerate(doc["entries"]):
        where = f"{path}: entries[{i}]"
        if not isinstance(entry, Mapping):
            raise TableError(f"{where}: must be an object, not {_short(entry)}")
        if "gpu_class" in entry and not isinstance(entry["gpu_class"], str):
            raise TableError(f"{where}.gpu_class: must be a string, not {_short(entry['gpu_class'])}")
        for name in ("best", "default"):
            config = entry.get(name)
            if config is not None and not isinstance(config, Mapping):
                raise TableError(
                    f"{where}.{name}: must be an object of integers or null, not {_short(config)}"
                )
            for key, value in (config or {}).items():
                if not _is_int(value):
                    raise TableError(f"{where}.{name}[{key!r}]: must be an integer, not {_short(value)}")
        for name in ("best_ms", "default_ms"):
            ms = entry.get(name)
            number = isinstance(ms, int | float) and not isinstance(ms, bool) and math.isfinite(ms)
            if ms is not None and not (number and ms >= 0):
                raise TableError(f"{where}.{name}: must be a finite number >= 0 or null, not {_short(ms)}")
        if "per_kernel" in entry and not isinstance(entry["per_kernel"], Mapping):
            raise TableError(f"{where}.per_kernel: must be an object, not {_short(entry['per_kernel'])}")


def new_doc(entries: Iterable[Mapping[str, Any]], **about: Any) -> TableDoc:
    """A table of ``entries``; ``about``: where it came from (a report's ``created`` and ``sweep_id``)."""
    return {"format": FORMAT, "version": VERSION, **about, "entries": list(entries)}  # type: ignore[typeddict-item]


def write(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """The one writer: ``doc`` (:func:`new_doc`) as indented JSON, atomically (a temporary file renamed over
    the target, so a reader never sees half a table)."""
    path = Path(path)
    write_text(path, json.dumps(doc, indent=1, default=str) + "\n")
    return path


def write_entries(path: str | Path, entries: Iterable[Mapping[str, Any]]) -> Path:
    """A tuning table of ``entries`` (as ``Tuning.table_entry`` makes them), written atomically."""
    return write(path, new_doc(entries))


def _parse_entry(raw: Any, where: str) -> list[Entry]:
    if not isinstance(raw, Mapping):
        raise TableError(f"{where}: must be an object")
    if not isinstance(raw.get("gpu_class"), str):
        raise TableError(f"{where}: field 'gpu_class' (a string such as \"h100\") is missing")
    if not isinstance(raw.get("size"), str | list):
        raise TableError(f"{where}: field 'size' (such as \"3328x1024\") is missing")
    gpu_class, size = str(raw["gpu_class"]), _check_size(raw["size"], where)
    source = str(raw.get("source", "sweep"))
    known = {"gpu_class", "size", "kernel", "source", "candidates", "configs", "config", "per_kernel", "best"}
    extra = {k: v for k, v in raw.items() if k not in known and isinstance(v, str | int | float)}
    if "kernel" in raw:
        cands = raw.get("candidates")
        if not isinstance(cands, list) or not cands:
            raise TableError(f"{where}: field 'candidates' must be a non-empty list")
        out = []
        for j, c in enumerate(cands):
            if not isinstance(c, Mapping) or not all(_is_int(c.get(k)) for k in ("blocks", "threads")):
                raise TableError(f"{where}.candidates[{j}]: needs integer 'blocks' and 'threads'")
            _check_launch(c["blocks"], c["threads"], f"{where}.candidates[{j}]")
            out.append({k: (int(v) if k in ("blocks", "threads") else v) for k, v in c.items()})
        return [Entry(gpu_class, size, str(raw["kernel"]), out, source, extra)]
    # A sweep report's entry: per-kernel rankings first (each kernel measured over its own space), then whole
    # configurations (best, candidates, configs, config), each split into its kernels' (blocks, threads).
    per_kernel: dict[str, list[dict[str, float]]] = {}

    def take(kernel: str, item: Any, part: str) -> None:
        if not isinstance(item, Mapping):
            raise TableError(f"{where}.{part}: must be an object")
        b = item.get(f"{kernel}.blocks", item.get("blocks"))
        t = item.get(f"{kernel}.threads", item.get("threads"))
        if not (_is_int(b) and _is_int(t)):
            raise TableError(
                f"{where}.{part}: '{kernel}.blocks' and '{kernel}.threads' must both be integers"
            )
        _check_launch(b, t, f"{where}.{part}", kernel)
        cand = {"blocks": int(b), "threads": int(t)}
        ms = item.get("ms", item.get("time_ms"))
        if not any(
            c["blocks"] == cand["blocks"] and c["threads"] == cand["threads"]
            for c in per_kernel.get(kernel, [])
        ):
            per_kernel.setdefault(kernel, []).append(
                cand | ({"time_ms": ms} if isinstance(ms, int | float) else {})
            )

    ranked = raw.get("per_kernel") or {}
    if not isinstance(ranked, Mapping):
        raise TableError(f"{where}.per_kernel: must be an object of kernel -> ranked list")
    for kernel, items in ranked.items():
        if not isinstance(items, list):
            raise TableError(f"{where}.per_kernel.{kernel}: must be a list")
        for j, item in enumerate(items):
            take(kernel, item, f"per_kernel.{kernel}[{j}]")
    configs: list[tuple[str, Any]] = []
    if isinstance(raw.get("best"), Mapping):
        configs.append(("best", raw["best"]))
    for part in ("candidates", "configs"):
        items = raw.get(part)
        if items is not None and not isinstance(items, list):
            raise TableError(f"{where}.{part}: must be a list")
        for j, item in enumerate(items or []):
            config = item.get("config", item) if isinstance(item, Mapping) else item
            configs.append((f"{part}[{j}]", config))
    if "config" in raw:
        configs.append(("config", raw["config"]))
    for part, config in configs:
        if not isinstance(config, Mapping):
            raise TableError(f"{where}.{part}: must be an object of '<kernel>.blocks'/'<kernel>.threads'")
        for kernel in sorted({k.rsplit(".", 1)[0] for k in config if k.endswith((".blocks", ".threads"))}):
            take(kernel, config, part)
    if not per_kernel:
        raise TableError(
            f"{where}: needs 'kernel' with 'candidates', or whole configurations of "
            "'<kernel>.blocks'/'<kernel>.threads' (per_kernel, best, candidates, configs)"
        )
    return [Entry(gpu_class, size, k, c, source, extra) for k, c in per_kernel.items()]


def _check_size(raw: Any, where: str) -> str:
    """``<cells x>x<cells y>``, both positive integers (what the CFD solver's ``size_key`` writes)."""
    if isinstance(raw, list) and not all(_is_int(n) for n in raw):
        raise TableError(
            f"{where}: field 'size' must be two positive integers like \"3328x1024\" (got {raw!r})"
        )
    size = size_key(raw)
    parts = size.split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise TableError(
            f"{where}: field 'size' must be two positive integers like \"3328x1024\" (got {raw!r})"
        )
    return size


def _check_launch(blocks: Any, threads: Any, where: str, kernel: str = "") -> None:
    """Blocks 1..MAX_BLOCKS, threads 1..MAX_THREADS; ``_is_int`` has already refused non-integers."""
    name = f"{kernel}." if kernel else ""
    if not 1 <= blocks <= MAX_BLOCKS:
        raise TableError(f"{where}: '{name}blocks' must be 1..{MAX_BLOCKS} (got {blocks!r})")
    if not 1 <= threads <= MAX_THREADS:
        raise TableError(f"{where}: '{name}threads' must be 1..{MAX_THREADS} (got {threads!r})")


def _depth(doc: Any) -> int:
    """How deep ``doc`` nests (a list or object is one level), without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping | list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                stack.extend((v, level + 1) for v in (item.values() if isinstance(item, Mapping) else item))
    return deepest


def _is_int(v: Any) -> bool:
    # An integral float (400.0) passes: a report's table goes through pandas, where a parameter column with a
    # null becomes float64. A fraction, an infinity or a string does not; the bounds refuse 1e30.
    return isinstance(v, int) and not isinstance(v, bool) or (isinstance(v, float) and v.is_integer())


def in_folder(folder: str | Path) -> Path:
    """Where a folder (a sweep's, a tuned run's output) keeps its table."""
    return Path(folder) / FILE_NAME


def table_file(table: str | Path) -> Path:
    """A sweep folder's ``tuning_table.json``, or ``table`` itself where it is a file."""
    path = Path(table)
    return in_folder(path) if path.is_dir() else path


@dataclass
class Seeds:
    """A table's ranked configurations for one tuning: ``configs`` best first (empty: none for it), the
    entry's ``source`` and ``size``, and ``where`` (a line naming the entry, or why there is none)."""

    configs: list[dict[str, int]]
    source: str
    size: str
    where: str
    objective: dict[str, str] = field(default_factory=lambda: {"minimize": "time"})  # what ranked them


def size_text(size: str | Sequence[int]) -> str:
    """A size as a table writes it, trailing extents of 1 dropped: ``(1000, 1, 1)`` -> ``"1000"``."""
    parts = size_key(size).split("x")
    while len(parts) > 1 and parts[-1] == "1":
        parts.pop()
    return "x".join(parts)


def table_seeds(
    table: str | Path, gpu_class: str, size: str | Sequence[int], default: Mapping[str, int]
) -> Seeds:
    """The ranked configurations a tuning table holds for the parameters of ``default``, for ``gpu_class`` at
    the entry nearest ``size`` (by cell count, on a log scale), each set in full.

    The one reader of a table's picks, for every run-time tuning (``autotune``, each CFD kernel, the fused
    step). Per entry, best first: ``per_kernel`` rankings that set every parameter (one kernel measured over
    its own space), then whole configurations (``best``, ``candidates``, ``configs``, ``config``; a
    ``kernel`` entry's ``blocks``/``threads`` as ``<kernel>.blocks``/``<kernel>.threads``). A configuration
    that sets some of the parameters takes the default for the others (a table written before a parameter
    joined the space); one that sets none of them is another kernel's. A value that is not an integer is a
    ``TableError`` naming the file and the entry.
    """
    path = table_file(table)
    doc = read(path)
    names = list(default)
    found: list[tuple[Mapping[str, Any], list[dict[str, int]]]] = []
    for i, raw in enumerate(doc["entries"]):
        where = f"{path}: entries[{i}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("gpu_class"), str):
            raise TableError(f"{where}: must be an object with 'gpu_class' (a string such as \"h100\")")
        parts = str(raw.get("size", "")).split("x")
        if (
            not isinstance(raw.get("size"), str)
            or not 1 <= len(parts) <= 3
            or not all(p.isascii() and p.isdigit() and int(p) > 0 for p in parts)
        ):
            raise TableError(
                f"{where}: field 'size' must be up to three positive integers like \"3328x1024\""
            )
        if raw["gpu_class"] == gpu_class:
            configs = _entry_configs(raw, names, default, path)
            if configs:
                found.append((raw, configs))
    if not found:
        return Seeds([], "", "", f"none: {path} has no {gpu_class} entry for {', '.join(names)}")
    entry, configs = found[_nearest([e for e, _ in found], size)]
    source, at = str(entry.get("source", "sweep")), size_text(entry["size"])
    return Seeds(configs, source, at, f"{source} {gpu_class} {at} ({path})", _objective(entry))


def _objective(entry: Mapping[str, Any]) -> dict[str, str]:
    return dict(entry.get("objective") or {"minimize": "time"})


def _nearest(entries: Sequence[Mapping[str, Any]], size: str | Sequence[int] | None) -> int:
    """The index of the entry nearest ``size`` by cell count, on a log scale (the first of equals; the first
    where ``size`` is None): the one rule by which every pick chooses among a GPU class's entries."""
    if size is None:
        return 0
    target = _cells(size_text(size))

    def distance(i: int) -> float:
        there = _cells(size_text(str(entries[i].get("size", ""))))
        return abs(math.log(there) - math.log(target)) if there > 0 and target > 0 else math.inf

    return min(range(len(entries)), key=distance)


@dataclass(frozen=True)
class Best:
    """A sweep table's pick for one GPU class (:func:`best_for`): ``tuned`` False where the table has no
    entry for the class (then the first entry's default configuration); ``ms`` the objective's cost (lower is
    better; time in ms by default), ``objective`` which one."""

    gpu_class: str
    config: dict[str, int]
    tuned: bool
    ms: float | None
    objective: dict[str, str]
    entry: TableEntry


def sweep_entries(doc: Mapping[str, Any], path: str | Path) -> list[TableEntry]:
    """A sweep's entries, those with a ``best`` configuration, each naming its GPU class (the C header's
    rows: one per class)."""
    entries = [e for e in doc["entries"] if "best" in e]
    if any(not isinstance(e.get("gpu_class"), str) for e in entries):
        raise TableError(f"{path}: an entry without a gpu_class")
    return entries


def best_for(table: str | Path, gpu_class: str, size: str | Sequence[int] | None = None) -> Best:
    """The configuration to launch on ``gpu_class``: its entry's ``best`` (the entry nearest ``size`` where
    the class has several), else the first entry's ``default``."""
    path = table_file(table)
    entries = [e for e in read(path)["entries"] if "best" in e]
    if not entries:
        raise TableError(f"{path}: entries: no sweep entry with a best configuration")
    mine = [e for e in entries if e.get("gpu_class") == gpu_class]
    entry = mine[_nearest(mine, size)] if mine else entries[0]
    config = entry.get("best") if mine else entry.get("default")
    if config is None:
        raise TableError(f"{path}: entries: no {'best' if mine else 'default'} configuration for {gpu_class}")
    ms = entry.get("best_ms") if mine else entry.get("default_ms")
    cost = None if ms is None else float(ms)
    return Best(
        gpu_class, {str(k): int(v) for k, v in config.items()}, bool(mine), cost, _objective(entry), entry
    )


def _entry_configs(
    raw: Mapping[str, Any], names: list[str], default: Mapping[str, int], path: Path
) -> list[dict[str, int]]:
    """``raw``'s configurations of ``names`` in its order, without repeats (``table_seeds``)."""
    ranked: list[Any] = []
    per_kernel = raw.get("per_kernel")
    if isinstance(per_kernel, Mapping):
        for items in per_kernel.values():
            if isinstance(items, list):
                ranked += [i for i in items if isinstance(i, Mapping) and all(n in i for n in names)]
    if "kernel" in raw and isinstance(raw.get("candidates"), list):
        k = raw["kernel"]
        ranked += [
            {f"{k}.blocks": c.get("blocks"), f"{k}.threads": c.get("threads")}
            if isinstance(c, Mapping)
            else c
            for c in raw["candidates"]
        ]
    else:
        ranked.append(raw.get("best"))
        for part in ("candidates", "configs"):
            items = raw.get(part)
            if items is not None and not isinstance(items, list):
                raise TableError(f"{path}: entry {raw['gpu_class']} {raw['size']}: '{part}' must be a list")
            ranked += [i.get("config", i) if isinstance(i, Mapping) else i for i in items or []]
        ranked.append(raw.get("config"))
    out: list[dict[str, int]] = []
    for j, config in enumerate(c for c in ranked if c is not None):
        if not isinstance(config, Mapping) or not any(n in config for n in names):
            continue
        if not all(_is_int(config[n]) for n in names if n in config):
            raise TableError(
                f"{path}: entry {raw['gpu_class']} {raw['size']}: configuration {j} is not an object of "
                "name -> integer"
            )
        picked = {n: int(config[n]) if n in config else int(default[n]) for n in names}
        if picked not in out:
            out.append(picked)
    return out
