"""The workload registry: which workload a name in a sweep spec is, and which code a sweep may run.

Every workload the project ships is registered in :data:`REGISTERED`, one line each (name -> its class,
written ``module:Class`` so nothing is imported before a spec names it; the class's module also defines the
``make_workload`` factory the workers call). :func:`workload_class` is the one lookup: the spec checker and
the plan ask the class it returns what it declares (``Workload.capabilities``, ``check_arguments``). Writing a
new workload: ``docs/workloads.md``.

A user's own workload is code rather than a name. A spec's ``workload: package.module:factory`` makes every
worker import that module and call the factory: code that runs as you. A spec is data, often someone else's
(a colleague's file, a committed sweep folder), so a spec naming code is not enough; the user who runs the
sweep must allow that code, in one of two ways:

* an entry point of an installed package in the group ``launchtune.workloads`` (installing the package is the
  decision to trust it)::

      [project.entry-points."launchtune.workloads"]
      mine = "mypkg.workload:make_workload"

  allows ``workload: mypkg.workload:make_workload`` and its short name ``workload: mine``;
* ``--allow-workload mypkg.workload:make_workload`` on the command line (repeatable), for unpackaged code.

Anything else is refused with the file and field named, before any folder is made or cluster started
(:func:`check_workload`); the workers build what :func:`make_workload` is given.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

from launchtune.kernels.workload import Capabilities, Workload, WorkloadError

from ..errors import UserError

ENTRY_POINT_GROUP = "launchtune.workloads"

# name -> module:Class. The one place a workload is registered (tests/architecture/test_workloads.py). The
# recorded-data replay is the pipeline's own workload: named here as text, so this module imports nothing
# above it.
REGISTERED = {
    "cfd": "launchtune.kernels.cfd.workload:CfdWorkload",
    "kernel": "launchtune.kernels.kernel.workload:KernelWorkload",
    "replay": "launchtune.pipeline.sweep.rehearsal:RehearsalWorkload",
    "tridiag": "launchtune.kernels.tridiag.workload:TridiagWorkload",
}

# module:factory, dotted names of Python identifiers on both sides (what importlib and getattr can take)
_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def builtin_names() -> list[str]:
    """The registered names: they need no allowing."""
    return sorted(REGISTERED)


def entry_point_workloads() -> dict[str, str]:
    """``name -> module:factory`` of every installed ``launchtune.workloads`` entry point."""
    return {ep.name: f"{ep.module}:{ep.attr}" for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _import(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    return functools.reduce(getattr, attr.split("."), importlib.import_module(module_name))


def workload_class(name: str, where: str = "workload") -> type[Workload] | None:
    """The class of the workload a spec names: a registered name's; None for code the user names (a
    ``module:factory`` or an installed entry point's name), which declares nothing before a worker imports
    it (whether it may run at all is :func:`check_workload`'s decision). An unknown name is one line,
    prefixed by ``where`` (the spec's file and field)."""
    if name in REGISTERED:
        return _import(REGISTERED[name])
    if ":" in name or name in entry_point_workloads():
        return None
    known = ", ".join(builtin_names() + sorted(entry_point_workloads()))
    raise UserError(f"{where}: unknown workload {name!r} (registered: {known}; or module:factory)")


def declared(name: str) -> Capabilities:
    """What the workload a sweep names declares: a registered class's capabilities; the defaults for code the
    user names (and for a name no longer installed, in a sweep folder read back)."""
    cls = workload_class(name) if name in REGISTERED else None
    return Capabilities() if cls is None else cls.capabilities


def resolve(name: str) -> str:
    """What a worker builds for ``name``: a registered name as is, an entry point's name as its
    ``module:factory``, a ``module:factory`` as is (already checked by :func:`check_workload`)."""
    if name in REGISTERED or ":" in name:
        return name
    return entry_point_workloads().get(name, name)


def make_workload(name: str, case: str, size: Any, backend: str = "auto", **options: Any) -> Workload:
    """Build the workload ``name`` names: a registered one through its module's ``make_workload``, a
    ``module:factory`` (or an entry point's) by importing it, on a worker. The factory must return a
    :class:`Workload`."""
    target = resolve(name)
    if target in REGISTERED:
        cls = workload_class(target)
        assert cls is not None
        made = importlib.import_module(cls.__module__).make_workload
    else:
        try:
            made = _import(target)  # an entry point may say A.b
        except (ImportError, AttributeError) as exc:
            module_name, _, factory = target.partition(":")
            raise WorkloadError(
                f"workload {target!r}: cannot import {factory!r} from {module_name!r} ({exc}); "
                f"use a registered name ({', '.join(builtin_names())}) or module:factory"
            ) from exc
    workload = made(case=case, size=size, backend=backend, **options)
    if not isinstance(workload, Workload):
        raise WorkloadError(
            f"workload {target!r} returned a {type(workload).__name__}, not a "
            "launchtune.kernels.workload.Workload (subclass it: it says what the pipeline may ask)"
        )
    return workload


def check_allow_flag(value: str) -> str:
    """One ``--allow-workload`` value: must be ``module:factory``."""
    if not _TARGET.fullmatch(value):
        raise UserError(
            f"--allow-workload: expected module:factory like mypkg.workload:make_workload, got {value!r}"
        )
    return value


def check_workload(name: str, allowed: Sequence[str], where: str) -> None:
    """Refuse ``name`` (a spec's ``workload``; ``where`` names file and field) unless it is a registered name,
    an entry point's name or target, or in ``allowed`` (the ``--allow-workload`` values)."""
    if name in builtin_names():
        return
    registered = entry_point_workloads()
    if name in registered or (":" in name and (name in registered.values() or name in allowed)):
        return
    if ":" not in name:
        names = ", ".join(builtin_names() + sorted(registered))
        raise UserError(
            f"{where}: unknown workload {name!r} (registered: {names}; or an allowed module:factory)"
        )
    raise UserError(
        f"{where}: {name!r} is code the workers would import and run, and nothing allows it: pass "
        f"--allow-workload {name} if you trust it, or install it as a {ENTRY_POINT_GROUP!r} entry point"
    )


def checked_options(cls: type[Workload], case: str, size: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """A registered workload's case, size and options checked by its class (``WorkloadError`` naming the
    field), returned as the workers get them: a ``kernel_spec`` workload's kernel spec pinned to the digest
    of what was just checked, which the workers verify before they compile or import anything."""
    cls.check_arguments(case, size, **options)
    if not cls.capabilities.kernel_spec:
        return dict(options)
    from launchtune.kernels.kernel.options import pin  # the kernel spec's own business

    return pin(**options)


def workload_code(spec: Any) -> list[tuple[str, str]]:
    """(where, module:function) of the Python a ``kernel_spec`` workload's options name (a kernel spec's
    ``reference`` and ``arguments_factory``), for :func:`check_workload` to allow or refuse like a
    ``module:factory`` workload. The options were checked when the spec was read."""
    if not declared(spec.workload).kernel_spec:
        return []
    from launchtune.kernels.kernel.options import code_references  # the kernel spec's own business

    return code_references(**spec.options)
