"""The tuning table: ranked configurations per (GPU class, problem size), as JSON.

Two producers write it: a tuned run (``source: "runtime"``, measured in a real run on that GPU class and size:
the next run locks to it without scanning) and a sweep's report (``source`` anything else, e.g. ``"sweep"`` or
``"surrogate"``: a ranked short list the next run scans instead of the whole space). An entry::

    {"format": "launchtune-tuning-table", "version": 1,
     "entries": [{"gpu_class": "h100", "size": "3328x1024", "source": "runtime",
                  "best": {"xi_flux.blocks": 400, "xi_flux.threads": 128},
                  "candidates": [{"config": {...}, "time_ms": 0.131}, ...]}, ...]}

A sweep report's entry (``pipeline/results/report.py``) also has ``per_kernel`` (kernel -> ranked
``{"xi_flux.blocks": 400, "xi_flux.threads": 128, "ms": ...}``), and ``configs`` or ``config`` may list more;
an older tuned run's entry names its ``kernel`` with ``candidates`` of ``blocks`` and ``threads``. Every
tuning reads its picks through :func:`table_seeds`; :class:`TuningTable` is the per-kernel view, each entry's
blocks and threads checked on load.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launchtune.kernels.atomic import write_text
from launchtune.kernels.files import DuplicateKey, FileRefused, loads_json, read_regular

FORMAT = "launchtune-tuning-table"
RUNTIME = "runtime"

# Bounds checked on load, so an absurd entry (threads 0, blocks -1 or 1e30, size 0x0) is refused with one line
# naming the file and entry, and never locked, used or written back by a tuned run. Threads: CUDA's limit per
# block on every GPU we target (a kernel's own, often lower, limit is in its launch space's constraints);
# blocks: CUDA's grid limit in x.
MAX_THREADS = 1024
MAX_BLOCKS = 2**31 - 1
MAX_DEPTH = 16  # the deepest a table nests is 6 (entries, entry, per_kernel, kernel, list, item)
MAX_BYTES = 64 * 2**20  # a table is kilobytes; a huge file is a mistake, not a table


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
        doc = read_table_doc(path)
        table = cls()
        for i, raw in enumerate(doc["entries"]):
            for entry in _parse_entry(raw, f"{path}: entries[{i}]"):
                table.add(entry)
        return table

    def save(self, path: str | Path) -> Path:
        """Write atomically: a temporary file renamed over the target."""
        path = Path(path)
        doc = {"format": FORMAT, "version": 1, "entries": [e.to_json() for e in self.entries]}
        write_text(path, json.dumps(doc, indent=1) + "\n")
        return path


def read_table_doc(path: Path) -> Mapping[str, Any]:
    """A tuning table file's JSON, its size, depth and ``entries`` list checked (one line per problem)."""
    try:
        data = read_regular(path, "tuning table", MAX_BYTES, missing_ok=True)  # a FIFO: refused, no hang
        if data is None:
            raise TableError(f"{path}: tuning table not found")
        doc = loads_json(data.decode("utf-8"))
    except FileRefused as exc:
        raise TableError(str(exc)) from None
    except DuplicateKey as exc:
        raise TableError(f"{path}: tuning table: {exc}") from None
    except RecursionError:
        raise TableError(f"{path}: nested deeper than a tuning table (at most {MAX_DEPTH} levels)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TableError(f"{path}: not a readable JSON tuning table ({exc})") from None
    if _depth(doc) > MAX_DEPTH:
        raise TableError(f"{path}: nested deeper than a tuning table (at most {MAX_DEPTH} levels)")
    if not isinstance(doc, Mapping) or not isinstance(doc.get("entries"), list):
        raise TableError(f"{path}: field 'entries' (a list) is missing")
    return doc


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


def table_file(table: str | Path) -> Path:
    """A sweep folder's ``tuning_table.json``, or ``table`` itself where it is a file."""
    path = Path(table)
    return path / "tuning_table.json" if path.is_dir() else path


@dataclass
class Seeds:
    """A table's ranked configurations for one tuning: ``configs`` best first (empty: none for it), the
    entry's ``source`` and ``size``, and ``where`` (a line naming the entry, or why there is none)."""

    configs: list[dict[str, int]]
    source: str
    size: str
    where: str


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
    doc = read_table_doc(path)
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
    target = _cells(size_text(size))

    def distance(item: tuple[Mapping[str, Any], list[dict[str, int]]]) -> float:
        there = _cells(size_text(item[0]["size"]))
        return abs(math.log(there) - math.log(target)) if there > 0 and target > 0 else math.inf

    entry, configs = min(found, key=distance)
    source, at = str(entry.get("source", "sweep")), size_text(entry["size"])
    return Seeds(configs, source, at, f"{source} {gpu_class} {at} ({path})")


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


def write_entries(path: str | Path, entries: Iterable[Mapping[str, Any]]) -> Path:
    """A tuning table of ``entries`` (as ``Tuning.table_entry`` makes them), written atomically."""
    path = Path(path)
    write_text(path, json.dumps({"format": FORMAT, "version": 1, "entries": list(entries)}, indent=1) + "\n")
    return path
