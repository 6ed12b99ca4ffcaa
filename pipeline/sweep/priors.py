"""A search's prior (``--prior PATH``, repeatable; the spec's ``search.prior``): recorded data of other GPU
classes or devices for the strategies that start from it (``transfer``).

A path is a sweep folder (its merged rows, one dataset per class), a Kernel Tuner cache (``.json[.gz]``), a
Parquet file, or a folder of any of these. Everything is read and checked here, before any cluster starts:
a missing or unreadable path, a sweep of another workload, case or launch space, and data whose parameters
are not the sweep's are one line naming the path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..errors import UserError
from ..jsonio import check_input
from ..store.datasets import Dataset, load_datasets
from ..store.folder import SweepFolder
from ..store.spec import SweepSpec

# What makes a sweep's launch space: a prior sweep must agree with this one on all of them.
SPACE_KEYS = ("workload", "case", "options")


def _sweep_prior(path: Path, spec: SweepSpec, where: str) -> list[Dataset]:
    folder = SweepFolder(path)
    try:
        theirs, _ = folder.read_spec()
    except UserError as exc:
        raise UserError(f"{where} {path}: {exc}") from None
    for key in SPACE_KEYS:
        mine, other = getattr(spec, key), getattr(theirs, key)
        if key == "options":  # the replay rehearsal's noise seed and sleep are not the space
            mine, other = _space_options(mine), _space_options(other)
        if mine != other:
            raise UserError(
                f"{where} {path}: a sweep of {key} {other!r}, not this sweep's {mine!r} (another workload or "
                "space)"
            )
    if not folder.merged_dir.is_dir():
        raise UserError(f"{where} {path}: no merged data (run `launchtune merge {path}` first)")
    return _load(folder.merged_dir, where, path)


def _space_options(options: dict) -> dict:
    ignore = {"seed", "time_scale", "fail_fraction", "straggler_fraction", "straggler_factor", "kill_workers"}
    return {k: v for k, v in (options or {}).items() if k not in ignore | {"kill_after", "kill_dir"}}


def _load(path: Path, where: str, named: Path) -> list[Dataset]:
    try:
        return load_datasets(path)
    except UserError as exc:
        raise UserError(f"{where} {named}: {exc}") from None
    except Exception as exc:  # noqa: BLE001  (a corrupt cache or file raises json, gzip, pyarrow, OS errors)
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise UserError(f"{where} {named}: unreadable ({why})") from None


def load_priors(paths: Sequence[str], spec: SweepSpec, where: str = "--prior") -> list[Dataset]:
    """Every dataset the prior paths hold, checked against ``spec`` and against each other."""
    found: list[Dataset] = []
    for text in paths:
        path = Path(text).expanduser()
        try:
            check_input(path, "file or folder to start from")
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
        if (path / "sweep.json").is_file():
            found += _sweep_prior(path, spec, where)
        elif path.is_dir() and any((p / "sweep.json").is_file() for p in path.iterdir() if p.is_dir()):
            for sub in sorted(p for p in path.iterdir() if (p / "sweep.json").is_file()):
                found += _sweep_prior(sub, spec, where)
        else:
            found += _load(path, where, path)
    if found:
        first = sorted(found[0].params)
        for d in found[1:]:
            if sorted(d.params) != first:
                raise UserError(
                    f"{where} {d.source or d.name}: its parameters differ from "
                    f"{found[0].source or found[0].name}'s "
                    "(data of two different spaces)"
                )
    return found


def check_params(
    prior: Sequence[Dataset],
    params: Sequence[str],
    where: str = "--prior",
    constants: Mapping[str, int] | None = None,
) -> None:
    """A prior must be of this sweep's space: the same parameters, but for those this space holds constant
    (``constants``: a Kernel Tuner cache drops a parameter with one value, such as the convolution's
    ``filter_height``)."""
    fixed = set(constants or {})
    for d in prior:
        missing = set(params) - set(d.params) - fixed
        extra = set(d.params) - set(params)
        if missing or extra:
            raise UserError(
                f"{where} {d.source or d.name}: its parameters ({', '.join(sorted(d.params))}) are not this "
                f"sweep's ({', '.join(sorted(params))}): data of another workload or space"
            )


def constants_of(values: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The parameters of a space that take one value, with it."""
    return {p: int(v[0]) for p, v in values.items() if len(v) == 1}


def aligned(prior: Sequence[Dataset], constants: Mapping[str, int]) -> list[Dataset]:
    """Each prior with the space's constant parameters it lacks added at their one value (in the space's
    parameter order where they are appended), so a model over the space's parameters can read it."""
    out = []
    for d in prior:
        add = {p: v for p, v in constants.items() if p not in d.params}
        if not add:
            out.append(d)
            continue
        out.append(replace(d, params=[*d.params, *add], frame=d.frame.assign(**add)))
    return out
