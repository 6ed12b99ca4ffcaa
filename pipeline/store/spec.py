"""Sweep specs: what to measure, where, how many samples, how to learn from them.

A spec is YAML under ``cluster_configs/sweeps/``. Every key is checked here once, so a wrong key or value
stops the
sweep before any cluster starts, with a message naming the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from launchtune.kernels.backend import BACKEND_NAMES
from launchtune.kernels.device import GPU_CLASSES
from launchtune.kernels.workload import SEED_MAX, Capabilities, Workload, WorkloadError

from ..errors import UserError
from ..paths import check_slug, inside, results_root
from ..yamlio import check_keys, load_yaml
from .workloads import checked_options, workload_class

# random: `samples` seeded draws; per_kernel_exhaustive: each kernel's parameter grid, the others at default;
# exhaustive: every configuration of the space (a brute force, as the Benchmark Hub's caches)
SAMPLERS = ("random", "per_kernel_exhaustive", "exhaustive")

_TOP = {
    "required": ["name", "workload", "case", "size"],
    "optional": [
        "description",
        "backend",
        "options",
        "gpu_classes",
        "samples",
        "test_fraction",
        "samplers",
        "repeats",
        "batch_size",
        "check",
        "seed",
        "validate",
        "train",
        "output",
        "search",
        "train_models",
        "remeasure",
    ],
}
# every top-level key a sweep spec may hold (the hostile-spec tests draw from it)
SPEC_KEYS = (*_TOP["required"], *_TOP["optional"])
_SEARCH_KEYS = {"required": ["strategy"], "optional": ["budget", "prior"]}
# A search's budget where none is given (``--budget``, ``search.budget``): the measurements per GPU class at
# which the default strategy's worst seed was within 5% of the optimum on the fused CFD and convolution spaces
# (replayed, 20-40 seeds; at 200 some seeds fell up to 16% short; docs/strategies.md, "The worst seed against
# the budget"). A smaller space is measured whole.
DEFAULT_BUDGET = 400
_VALIDATE_KEYS = ["top_k", "pool", "repeats", "rounds", "incumbents"]
_TRAIN_KEYS = ["hidden_layers", "max_epochs", "max_rows", "loco_rows"]


@dataclass(frozen=True)
class ValidateSpec:
    """How the predicted best is found and re-measured: ``pool`` candidates ranked, ``top_k`` re-measured."""

    top_k: int = 3
    pool: int = 20000
    repeats: int = 5
    # interleaved rounds of the predicted best against the default, for the ratio's 95% interval
    # (kernels/compare.py); each round times both with `repeats` steps
    rounds: int = 21
    # the fastest configurations the sweep recorded (a surrogate search's incumbents), re-measured beside the
    # model's top_k: the pick is the fastest of all that ran, never a step back from the sweep's best
    incumbents: int = 3


@dataclass(frozen=True)
class TrainSpec:
    # Table 2 of the CFD seed gives every MLP hyperparameter except the layer sizes; these are our choice.
    hidden_layers: tuple[int, ...] = (64, 64, 32)
    max_epochs: int = 200
    # Rows a class is trained on at most (a seeded uniform draw above it; metrics.json states both counts):
    # issue 18's rehearsal, where fitting 10^5 rows cost more than it taught. null: every row.
    max_rows: int | None = 50_000
    # Rows of each training class a leave-one-class-out MLP fit uses at most (a seeded draw; gradient boosting
    # and every other fit use all rows). Those fits were most of combine's time, and their scores vary more
    # with the seed than with this cap (data/cfd/combined/sweep_paper/PROVENANCE.md). null: every row.
    loco_rows: int | None = 2_000


@dataclass(frozen=True)
class SearchSpec:
    """A budgeted search instead of a random sample (``launchtune sweep --strategy``): per GPU class,
    ``strategy`` (a name of ``launchtune.pipeline.strategies``, or ``kt:<name>``) chooses the ``budget``
    configurations measured; ``prior``: recorded data of other classes or devices (sweep folders, Kernel
    Tuner caches, folders of them) for the strategies that use it (``transfer``)."""

    strategy: str
    budget: int = DEFAULT_BUDGET
    prior: tuple[str, ...] = ()


@dataclass(frozen=True)
class SweepSpec:
    name: str
    workload: str
    case: str
    size: str
    backend: str = "auto"
    options: dict[str, Any] = field(default_factory=dict)
    gpu_classes: tuple[str, ...] | None = None  # None: every class the cluster serves
    samples: int = 200
    test_fraction: float = 0.25
    samplers: tuple[str, ...] = ("random",)
    repeats: int = 3
    batch_size: int | str = (
        25  # or "auto": chosen at the first run (launchtune.pipeline.store.batching.auto_batch_size)
    )
    check: bool = True
    seed: int = 0
    validate: ValidateSpec = field(default_factory=ValidateSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    output: str | None = None
    description: str = ""
    source: str = ""  # the file it came from
    search: SearchSpec | None = None  # None: the random sample of ``samples`` configurations
    # What follows the measuring (None: a sweep without a search does both, a search neither): surrogate
    # models trained on the rows, and the pick re-measured against the default in ``validate.rounds``
    # interleaved rounds. A search's rows are its strategy's choice, not a sample of the space: models fitted
    # on them had an R2 below zero in every such run we saw (issue 53), and the pick is its own best row.
    train_models: bool | None = None
    remeasure: bool | None = None

    def trains(self) -> bool:
        """Whether models are trained on the rows (``train_models``; by default without a search)."""
        return self.search is None if self.train_models is None else self.train_models

    def remeasures(self) -> bool:
        """Whether the pick is re-measured against the default (by default without a search)."""
        return self.search is None if self.remeasure is None else self.remeasure

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gpu_classes"] = list(self.gpu_classes) if self.gpu_classes else None
        d["samplers"] = list(self.samplers)
        d["train"]["hidden_layers"] = list(self.train.hidden_layers)
        if self.search is not None:
            d["search"]["prior"] = list(self.search.prior)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SweepSpec:
        d = dict(d)
        d["gpu_classes"] = tuple(d["gpu_classes"]) if d.get("gpu_classes") else None
        d["samplers"] = tuple(d["samplers"])
        d["validate"] = ValidateSpec(**d["validate"])
        train = dict(d["train"])
        train["hidden_layers"] = tuple(train["hidden_layers"])
        d["train"] = TrainSpec(**train)
        search = d.get("search")
        d["search"] = (
            None if not search else SearchSpec(search["strategy"], search["budget"], tuple(search["prior"]))
        )
        return cls(**d)

    def planning_key(self) -> dict[str, Any]:
        """The fields that decide which configurations are measured; a rerun must agree on all of them."""
        keys = (
            "workload",
            "case",
            "size",
            "backend",
            "options",
            "samples",
            "samplers",
            "repeats",
            "batch_size",
            "check",
            "seed",
        )
        d = self.to_dict()
        key = {k: d[k] for k in keys}
        if self.search is not None:  # a search measures what its strategy chooses: another plan
            key["search"] = d["search"]
        return key

    def default_out(self) -> Path:
        """The sweep folder without ``--out``: ``results/<output or name>``, never outside results/."""
        return inside(results_root(), self.output or self.name, f"{self.source}: output")


# Upper bounds of the values that size memory or time, checked before any cluster starts. Each is far above
# any sweep we run (the paper's: 10,000 samples, a 20,000 pool, layers of 64) and far below what would
# exhaust a node: a plan of 10^6 configurations is ~100 MB of JSON; an MLP of 8 layers of 4096 is ~1 GB.
LIMITS = {
    "samples": 1_000_000,
    "batch_size": 100_000,
    "repeats": 10_000,
    "seed": SEED_MAX,  # scikit-learn's random_state and numpy's RandomState: 0 .. 2**32 - 1
    "validate.top_k": 1_000,
    "validate.pool": 1_000_000,
    "validate.repeats": 10_000,
    "validate.rounds": 10_000,
    "validate.incumbents": 1_000,
    "train.hidden_layers": 4096,  # per layer
    "train.max_epochs": 100_000,
    "search.budget": 50_000,  # a search's candidate pool holds at most this many (strategies.base.POOL_LIMIT)
    "workers_per_class": 4096,  # SLURM jobs or local CPU workers of one class
}
MAX_LAYERS = 8


def _int(value: Any, where: str, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UserError(f"{where}: must be an integer >= {minimum} (got {value!r})")
    if maximum is not None and value > maximum:
        raise UserError(f"{where}: at most {maximum:,} (got {value:,})")
    return value


def limited(value: Any, key: str, where: str, minimum: int = 0) -> int:
    """``value`` checked against ``LIMITS[key]`` (the CLI overrides too); ``where`` prefixes the error."""
    return _int(value, where, minimum, LIMITS[key])


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str | int) or isinstance(value, bool) or str(value).strip() == "":
        raise UserError(f"{where}: must be a non-empty string (got {value!r})")
    return str(value)


def _size(value: Any, where: str) -> str:
    text = _str(value, where).lower().replace(" ", "")
    parts = text.split("x")
    # ASCII digits only: str.isdigit() is also true of superscripts and other scripts' digits
    # and at most 18 of them: a size is an int64 (int() of thousands of digits is a ValueError, not a size)
    if not all(p.isascii() and p.isdigit() and len(p) <= 18 and int(p) > 0 for p in parts):
        raise UserError(f"{where}: must be a positive size like 208x64 or 100000 (got {value!r})"[:300])
    return text


def _gpu_class_list(value: Any, where: str) -> tuple[str, ...] | None:
    if value in (None, "auto"):
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: must be 'auto' or a list of GPU classes (got {value!r})")
    # A plain name here; whether the class exists depends on the cluster (the registry, or a site's SLURM
    # config), so the command checks it with check_gpu_class before the cluster starts.
    return tuple(check_slug(v, where) for v in value)


def check_gpu_class(value: Any, where: str, known: Sequence[str] = GPU_CLASSES) -> str:
    """A known class name (``h100``, ``cpu``, a site's class of its SLURM config): an unknown one is a typo
    until proven otherwise."""
    if value not in known:
        raise UserError(f"{where}: unknown GPU class {value!r} (known: {', '.join(known)})")
    return value


def _mapping(data: dict[str, Any], key: str, where: str, what: str) -> dict[str, Any]:
    """``data[key]`` as a mapping with string keys: absent or empty (``key:`` alone) is ``{}``; any other
    value that is not a mapping (``0``, ``[]``, ``false``) is refused, not read as the defaults."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: must be a mapping of {what} (got {value!r})"[:300])
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise UserError(f"{where}: {bad[0]!r}: keys must be names (strings)"[:300])
    return value


def _check_workload(
    kind: type[Workload] | None, case: str, size: str, options: dict[str, Any], source: str
) -> dict[str, Any]:
    """A registered workload's case, size and options, checked by its class before any cluster starts (issue
    14: they failed on the first worker, after the cluster had started), as the workers get them (files
    pinned). Code the user names (``kind`` None: ``module:factory``, an entry point) is checked where it is
    imported; whether it may run at all is ``workloads.check_workload``'s decision."""
    if kind is None:
        return options
    try:
        return checked_options(kind, case, size, options)
    except WorkloadError as exc:
        raise UserError(f"{source}: {exc.field}: {exc}") from None


def _resolve_paths(path_options: tuple[str, ...], options: dict[str, Any], source: str) -> dict[str, Any]:
    """A workload's file options (``kernel``'s ``spec``) are relative to the sweep spec: made absolute here,
    so the workers and a rerun from another folder find the same file."""
    out = dict(options)
    for key in path_options:
        value = out.get(key)
        if isinstance(value, str) and value.strip() and not Path(value).is_absolute():
            try:
                out[key] = str((Path(source).parent / value).resolve())
            except (ValueError, OSError, RuntimeError) as exc:  # a NUL in the name, a symlink loop
                raise UserError(
                    f"{source}: options.{key}: {value!r} is not a usable path ({exc})"[:300]
                ) from None
    return out


def parse_spec(data: dict[str, Any], source: str) -> SweepSpec:
    """Validate a spec mapping; ``source`` (the file name) prefixes every message."""
    check_keys(data, source, **_TOP)
    f = f"{source}: "
    name = check_slug(_str(data["name"], f + "name"), f + "name")
    workload = _str(data["workload"], f + "workload")
    backend = data.get("backend", "auto")
    if backend not in BACKEND_NAMES:
        raise UserError(f"{f}backend: {backend!r} is not one of {', '.join(BACKEND_NAMES)}")
    kind = workload_class(workload, f + "workload")  # the one lookup: the class answers from here on
    caps = kind.capabilities if kind is not None else Capabilities()
    options = _mapping(data, "options", f + "options", "workload options")
    options = _resolve_paths(caps.path_options, options, source)
    if caps.gpu_only and backend == "numpy":
        raise UserError(f"{f}backend: the {workload} workload runs CUDA only; use backend cupy or auto")
    samplers = _samplers(data.get("samplers", ["random"]), f)
    test_fraction = data.get("test_fraction", 0.25)
    if not isinstance(test_fraction, int | float) or not 0.05 <= test_fraction <= 0.5:
        raise UserError(f"{f}test_fraction: must be a number between 0.05 and 0.5 (got {test_fraction!r})")
    check = data.get("check", True)
    if not isinstance(check, bool):
        raise UserError(f"{f}check: must be true or false (got {check!r})")

    vspec = _validate_section(_mapping(data, "validate", f + "validate", ", ".join(_VALIDATE_KEYS)), f)
    tspec = _train_section(_mapping(data, "train", f + "train", ", ".join(_TRAIN_KEYS)), f)
    output = _output(data.get("output"), f)

    search = parse_search(data.get("search"), f + "search")
    case, size = _str(data["case"], f + "case"), _size(data["size"], f + "size")
    options = _check_workload(kind, case, size, options, source)
    return SweepSpec(
        name=name,
        workload=workload,
        case=case,
        size=size,
        backend=backend,
        options=options,
        gpu_classes=_gpu_class_list(data.get("gpu_classes"), f + "gpu_classes"),
        samples=limited(data.get("samples", 200), "samples", f + "samples", 0),
        test_fraction=float(test_fraction),
        samplers=tuple(dict.fromkeys(samplers)),
        repeats=limited(data.get("repeats", 3), "repeats", f + "repeats", 1),
        batch_size="auto"
        if data.get("batch_size") == "auto"
        else limited(data.get("batch_size", 25), "batch_size", f + "batch_size", 1),
        check=check,
        seed=limited(data.get("seed", 0), "seed", f + "seed", 0),
        validate=vspec,
        train=tspec,
        output=output,
        description=str(data.get("description", "")),
        source=source,
        search=search,
        train_models=_optional_bool(data.get("train_models"), f + "train_models"),
        remeasure=_optional_bool(data.get("remeasure"), f + "remeasure"),
    )


def _samplers(samplers: Any, f: str) -> list[str]:
    """``samplers``: one name or a list of them, each one of ``SAMPLERS``."""
    if isinstance(samplers, str):
        samplers = [samplers]
    if not isinstance(samplers, list) or not samplers or any(s not in SAMPLERS for s in samplers):
        raise UserError(f"{f}samplers: must list one or more of {', '.join(SAMPLERS)} (got {samplers!r})")
    return samplers


def _validate_section(validate: dict[str, Any], f: str) -> ValidateSpec:
    """The ``validate`` section: how the picks are re-measured, each count within its bounds."""
    check_keys(validate, f + "validate", optional=_VALIDATE_KEYS)
    vdef = ValidateSpec()
    return ValidateSpec(
        top_k=limited(validate.get("top_k", vdef.top_k), "validate.top_k", f + "validate.top_k", 1),
        pool=limited(validate.get("pool", vdef.pool), "validate.pool", f + "validate.pool", 1),
        repeats=limited(validate.get("repeats", vdef.repeats), "validate.repeats", f + "validate.repeats", 1),
        rounds=limited(validate.get("rounds", vdef.rounds), "validate.rounds", f + "validate.rounds", 1),
        incumbents=limited(
            validate.get("incumbents", vdef.incumbents), "validate.incumbents", f + "validate.incumbents", 0
        ),
    )


def _train_section(train: dict[str, Any], f: str) -> TrainSpec:
    """The ``train`` section: the network's layers and epochs, the rows training and leave-one-class-out
    may use (null: all)."""
    check_keys(train, f + "train", optional=_TRAIN_KEYS)
    layers = train.get("hidden_layers", list(TrainSpec().hidden_layers))
    if not isinstance(layers, list) or not layers or len(layers) > MAX_LAYERS:
        raise UserError(
            f"{f}train.hidden_layers: must be a list of 1 to {MAX_LAYERS} layer widths (got {layers!r})"[:300]
        )
    return TrainSpec(
        hidden_layers=tuple(
            limited(w, "train.hidden_layers", f"{f}train.hidden_layers[{i}]", 1) for i, w in enumerate(layers)
        ),
        max_epochs=limited(
            train.get("max_epochs", TrainSpec().max_epochs), "train.max_epochs", f + "train.max_epochs", 1
        ),
        max_rows=None
        if train.get("max_rows", TrainSpec().max_rows) is None
        else _int(train.get("max_rows", TrainSpec().max_rows), f + "train.max_rows", 100),
        loco_rows=None
        if train.get("loco_rows", TrainSpec().loco_rows) is None
        else _int(train.get("loco_rows", TrainSpec().loco_rows), f + "train.loco_rows", 100),
    )


def _output(output: Any, f: str) -> str | None:
    """``output``: a folder inside the results folder (not the results folder itself), or None."""
    if output is None:
        return None
    output = _str(output, f + "output")
    if inside(results_root(), output, f + "output") == results_root():
        raise UserError(f"{f}output: {output!r} is the results folder itself; name a folder inside it")
    return output


def _optional_bool(value: Any, where: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise UserError(f"{where}: must be true or false (got {value!r})"[:300])


_STRATEGY_NAME = re.compile(r"(kt:)?[a-z][a-z0-9_]*")


def check_strategy(name: Any, where: str) -> str:
    """A strategy's name as a spec records it: ``default``, a strategy's, or ``kt:<name>``. Only its form is
    checked here: whether such a strategy exists is the sweep plan's check (``sweep.plan``), once."""
    if isinstance(name, str) and _STRATEGY_NAME.fullmatch(name):
        return name
    raise UserError(
        f"{where}: {name!r} is not a strategy name (launchtune strategies --list shows them)"[:300]
    )


def parse_search(value: Any, where: str) -> SearchSpec | None:
    """The spec's ``search: {strategy, budget, prior}`` block (None where there is none; the budget
    ``DEFAULT_BUDGET`` where it names none)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise UserError(f"{where}: must be a mapping with strategy, and optionally budget and prior")
    check_keys(value, where, **_SEARCH_KEYS)
    strategy = check_strategy(value["strategy"], f"{where}.strategy")
    budget = limited(value.get("budget", DEFAULT_BUDGET), "search.budget", f"{where}.budget", 1)
    prior = value.get("prior") or []
    if isinstance(prior, str):
        prior = [prior]
    if not isinstance(prior, list) or not all(isinstance(p, str) and p.strip() for p in prior):
        raise UserError(f"{where}.prior: must be a path or a list of paths (got {prior!r})")
    return SearchSpec(strategy, budget, tuple(prior))


def load_spec(path: str | Path) -> SweepSpec:
    return parse_spec(load_yaml(path), str(path))
