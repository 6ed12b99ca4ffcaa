"""Which workloads a sweep may run: registered names, and ``module:factory`` only where the user allows it.

A spec's ``workload: package.module:factory`` makes every worker import that module and call the factory: code
that runs as you. A spec is data, often someone else's (a colleague's file, a committed sweep folder), so a
spec naming code is not enough; the user who runs the sweep must allow that code, in one of two ways:

* an entry point of an installed package in the group ``launchtune.workloads`` (installing the package is the
  decision to trust it)::

      [project.entry-points."launchtune.workloads"]
      mine = "mypkg.workload:make_workload"

  allows ``workload: mypkg.workload:make_workload`` and its short name ``workload: mine``;
* ``--allow-workload mypkg.workload:make_workload`` on the command line (repeatable), for unpackaged code.

Anything else is refused with the file and field named, before any folder is made or cluster started
(:func:`check_workload`); the workers build what :func:`resolve` names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from launchtune.kernels.workload import code_references, workload_names
from launchtune.pipeline.errors import UserError

ENTRY_POINT_GROUP = "launchtune.workloads"

# Workloads the pipeline itself provides, by name: they read recorded data (pipeline's business), so they are
# registered here rather than in launchtune.kernels.workload, which never imports pipeline.
PIPELINE_WORKLOADS = {"replay": "launchtune.pipeline.sweep.rehearsal:make_workload"}

# module:factory, dotted names of Python identifiers on both sides (what importlib and getattr can take)
_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def builtin_names() -> list[str]:
    """The names that need no allowing: ``launchtune.kernels.workload``'s and :data:`PIPELINE_WORKLOADS`'."""
    return sorted([*workload_names(), *PIPELINE_WORKLOADS])


def entry_point_workloads() -> dict[str, str]:
    """``name -> module:factory`` of every installed ``launchtune.workloads`` entry point."""
    return {ep.name: f"{ep.module}:{ep.attr}" for ep in entry_points(group=ENTRY_POINT_GROUP)}


def resolve(name: str) -> str:
    """What a worker builds for ``name``: a ``kernels.workload`` name as is, a pipeline or entry-point name as
    its ``module:factory``, a ``module:factory`` as is (already checked by :func:`check_workload`)."""
    if name in workload_names() or ":" in name:
        return name
    if name in PIPELINE_WORKLOADS:
        return PIPELINE_WORKLOADS[name]
    return entry_point_workloads().get(name, name)


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


def workload_code(spec: Any) -> list[tuple[str, str]]:
    """(where, module:function) of the Python a registered workload's options name (a kernel spec's
    ``reference`` and ``arguments_factory``), for :func:`check_workload` to allow or refuse like a
    ``module:factory`` workload. The options were checked when the spec was read."""
    if spec.workload not in workload_names():
        return []
    return code_references(spec.workload, spec.options)
