"""The ``kernel`` workload's options, checked before anything is built (on the login node, before a cluster
starts), and the kernel spec pinned to its digest so a worker builds only what was checked."""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping, Sequence
from functools import reduce
from pathlib import Path
from typing import Any

from ..device import CLASS_SPECS
from ..workload import WorkloadError
from .compile import (
    default_workers,
)
from .errors import SpecError
from .spec import KernelSpec, check_for_problem, load_kernel_spec

OPTIONS = ("spec", "seed", "compile_workers", "spec_sha256", "energy")
WORKERS_ENV = "LAUNCHTUNE_COMPILE_WORKERS"
# CUDA's limits on a launch's shape, the same on every card since compute capability 3.0


def _spec_path(options: Mapping[str, Any]) -> Path:
    path = options.get("spec")
    if not isinstance(path, str | Path) or not str(path).strip():
        raise WorkloadError(
            "the kernel workload needs options.spec: the kernel spec's YAML", field="options.spec"
        )
    return Path(path)


def workers_option(value: Any, where: str = "options.compile_workers") -> int:
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


def import_target(target: str, where: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        return reduce(getattr, attr.split("."), importlib.import_module(module_name))
    except (ImportError, AttributeError) as exc:
        raise SpecError(f"{where}: cannot import {target!r} ({exc})") from None


def largest_memory_bytes() -> float:
    """The most memory any GPU class of the registry has: arrays larger than it fit no card we know."""
    return max(s.memory_gb for s in CLASS_SPECS.values()) * 1e9


def check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise WorkloadError(f"unknown option {unknown[0]!r} (options: {', '.join(OPTIONS)})", field="options")
    seed = options.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise WorkloadError(f"expected an integer >= 0, got {seed!r}", field="options.seed")
    workers_option(options.get("compile_workers"))
    digest = options.get("spec_sha256")
    if digest is not None and (not isinstance(digest, str) or not re.fullmatch("[0-9a-f]{64}", digest)):
        raise WorkloadError(f"expected a sha256 in hex, got {digest!r}"[:300], field="options.spec_sha256")
    energy_option(options.get("energy", "auto"))


def checked_spec(options: Mapping[str, Any]) -> KernelSpec:
    """The kernel spec ``options`` name, and, where they carry its ``spec_sha256`` (a sweep pins the digest
    of the spec it checked), refused unless it is still that spec: the Python it names is imported, and its
    source compiled, only as it was checked and allowed."""
    spec = load_kernel_spec(_spec_path(options))
    expected = options.get("spec_sha256")
    if expected is not None and spec.digest != expected:
        raise WorkloadError(
            f"{spec.path} (or its source {spec.source.name}) changed since the sweep checked it; run the "
            "sweep again to check the new one",
            field="options.spec",
        )
    return spec


def pin(**options: Any) -> dict[str, Any]:
    """``options`` with the digest of the kernel spec as it is now, which the workers verify before they
    compile or import anything (the sweep pins a ``kernel_spec`` workload's options once checked)."""
    return {**options, "spec_sha256": load_kernel_spec(_spec_path(options)).digest}


def energy_option(value: Any) -> str:
    if value is True or value == "true":
        return "true"
    if value is False or value == "false":
        return "false"
    if value == "auto":
        return "auto"
    raise WorkloadError(f"expected auto, true or false, got {value!r}", field="options.energy")


def check_arguments(case: str, size: str | Sequence[int], **options: Any) -> None:
    """A sweep's kernel workload checked before any cluster starts (``KernelWorkload.check_arguments``):
    the options, the whole kernel spec, its default configuration at this size, and arrays that fit the
    largest GPU of the registry (the card's own memory is checked where the workload is built)."""
    check_options(options)
    spec = load_kernel_spec(_spec_path(options))
    check_for_problem(spec, spec.problem(size), largest_memory_bytes(), "any GPU class of the registry,")


def code_references(**options: Any) -> list[tuple[str, str]]:
    """(field, module:function) of the Python the kernel spec names (its reference, its arguments
    factory): a sweep allows these as it allows a ``module:factory`` workload."""
    return checked_spec(options).code_references()
