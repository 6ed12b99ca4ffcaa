"""The tuning table: ranked launch parameters per (GPU class, problem size, kernel), as JSON.

Two producers write it: a tuned run (``source: "runtime"``, measured in a real run on that GPU class and size:
the next run locks to it without scanning) and a sweep's report (``source`` anything else, e.g. ``"sweep"`` or
``"surrogate"``: a ranked short list the next run scans instead of the whole space). The canonical file::

    {"format": "launchtune-tuning-table", "version": 1,
     "entries": [{"gpu_class": "h100", "size": "3328x1024", "kernel": "xi_flux", "source": "sweep",
                  "candidates": [{"blocks": 400, "threads": 128, "time_ms": 0.131}, ...]}, ...]}

An entry without ``kernel`` is a sweep report's (``pipeline/report.py``): ``per_kernel`` (kernel -> ranked
``{"xi_flux.blocks": 400, "xi_flux.threads": 128, "ms": ...}``), ``best`` (a whole configuration),
``candidates`` (``[{"config": {...}, "ms": ...}]``, best first), ``configs`` or ``config``; the reader splits
them into one entry per kernel, per-kernel rankings first, so a report exports what it measured as it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launchtune.kernels.atomic import write_text
from launchtune.kernels.files import DuplicateKey, loads_json

FORMAT = "launchtune-tuning-table"
RUNTIME = "runtime"

# Bounds checked on load, so an absurd entry (threads 0, blocks -1 or 1e30, size 0x0) is refused with one line
# naming the file and entry, and never locked, used or written back by a tuned run. Threads: CUDA's limit per
# block on every GPU we target (a kernel's own, often lower, limit is applied by ``attach.fit_candidates``);
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
    """Entries keyed by (GPU class, size, kernel); later ``add`` of the same key replaces the earlier one."""

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

    def lookup(self, gpu_class: str, size: str | Sequence[int], kernel: str) -> Entry | None:
        """The entry for exactly this key, else this class and kernel at the nearest size (by cell count)."""
        size = size_key(size)
        exact = self._entries.get((gpu_class, size, kernel))
        if exact is not None:
            return exact
        near = [e for (g, _, k), e in self._entries.items() if g == gpu_class and k == kernel]
        if not near:
            return None
        target = math.log(_cells(size)) if _cells(size) > 0 else 0.0
        return min(
            near, key=lambda e: abs(math.log(_cells(e.size)) - target) if _cells(e.size) > 0 else math.inf
        )

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
        if path.stat().st_size > MAX_BYTES:
            size = path.stat().st_size
            raise TableError(f"{path}: {size} bytes is not a tuning table (at most {MAX_BYTES})")
        doc = loads_json(path.read_text())
    except FileNotFoundError:
        raise TableError(f"{path}: tuning table not found") from None
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


def seed_configs(
    table: str | Path, gpu_class: str, problem: Sequence[int], names: Sequence[str], count: int = 8
) -> tuple[list[dict[str, int]], str]:
    """A sweep table's ranked whole configurations (``best``, then ``candidates``) for ``gpu_class`` at the
    size nearest ``problem`` (by cell count, on a log scale), at most ``count``; those that do not set exactly
    ``names`` are left out. Also a line saying where they came from, or why there are none."""
    path = table_file(table)
    doc = read_table_doc(path)
    mine = [e for e in doc["entries"] if isinstance(e, Mapping) and e.get("gpu_class") == gpu_class]
    if not mine:
        return [], f"none: {path} has no {gpu_class} entry"
    target = math.log(max(1, math.prod(int(n) for n in problem)))
    entry = min(
        mine, key=lambda e: abs(math.log(c) - target) if (c := _cells(str(e.get("size")))) > 0 else math.inf
    )
    ranked: list[Any] = [entry.get("best")]
    ranked += [c.get("config", c) if isinstance(c, Mapping) else c for c in entry.get("candidates") or []]
    out: list[dict[str, int]] = []
    for config in ranked:
        if not isinstance(config, Mapping) or sorted(config) != sorted(names):
            continue
        if not all(_is_int(config[n]) for n in names):
            continue
        picked = {n: int(config[n]) for n in names}
        if picked not in out:
            out.append(picked)
    return out[:count], f"{entry.get('source', 'sweep')} {gpu_class} {entry.get('size', '?')} ({path})"
