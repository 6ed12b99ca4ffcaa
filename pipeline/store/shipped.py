"""The sweep specs and example kernels that ship with launchtune (package data), by name from any folder.

``launchtune sweep default`` runs ``cluster_configs/sweeps/default.yaml`` whether launchtune runs from a
checkout or from a wheel: the files are found through :mod:`importlib.resources`, never through the working
folder. ``launchtune examples`` lists them and copies one into a folder of the user's, to edit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from launchtune.kernels.atomic import atomic_path

from ..errors import UserError
from ..paths import make_folder
from ..yamlio import load_yaml

# Package data: a wheel installs it as plain files, so the folders are real paths.
SPEC_DIR = Path(str(files("launchtune.cluster_configs"))) / "sweeps"
EXAMPLE_DIR = Path(str(files("launchtune.kernels.examples")))
SHIPPED_PREFIX = "../../kernels/examples/"  # how a shipped sweep spec names an example's kernel spec


@dataclass(frozen=True)
class Shipped:
    """One shipped spec or example kernel: its name, one line saying what it is, and where it runs."""

    name: str
    description: str
    runs_on: str  # "GPU", "CPU" or "GPU or CPU"
    files: tuple[Path, ...]  # what `launchtune examples NAME DIR` copies (the README is written)


def shipped_specs() -> dict[str, Path]:
    """Every shipped sweep spec by name (its file's stem)."""
    return {p.stem: p for p in sorted(SPEC_DIR.glob("*.yaml"))}


def spec_path(value: str | Path) -> Path:
    """A sweep spec's path: ``value`` where it names a file, else the shipped spec of that name (``default``
    or ``default.yaml``); one line listing the shipped ones where it is neither."""
    path = Path(value)
    if os.path.lexists(path):  # a file, or a broken link or a loop, which load_yaml names as such
        return path
    name = path.name.removesuffix(".yaml")
    shipped = shipped_specs()
    if path.name == str(value) and name in shipped:  # a bare name, no folder: the shipped spec
        return shipped[name]
    hint = f"; the shipped one is `launchtune sweep {name}`" if name in shipped else ""
    raise UserError(
        f"{value}: no such file, nor a shipped spec (shipped: {', '.join(shipped)}; "
        f"launchtune examples lists them){hint}"
    )


def _runs_on(backend: object) -> str:
    return {"cupy": "GPU", "numpy": "CPU"}.get(str(backend), "GPU or CPU")


def _kernel_spec(sweep: dict) -> str | None:
    """The example kernel a shipped sweep spec tunes (``convolution``), or None."""
    spec = (sweep.get("options") or {}).get("spec")
    if isinstance(spec, str) and spec.startswith(SHIPPED_PREFIX):
        return Path(spec).stem
    return None


def catalogue() -> tuple[dict[str, Shipped], dict[str, Shipped]]:
    """(sweep specs, example kernels) by name, each with what it is and where it runs."""
    specs: dict[str, Shipped] = {}
    examples: dict[str, Shipped] = {}
    for name, path in shipped_specs().items():
        data = load_yaml(path)
        runs_on = _runs_on(data.get("backend", "auto"))
        specs[name] = Shipped(name, str(data.get("description", "")), runs_on, (path,))
        kernel = _kernel_spec(data)
        if kernel is not None:
            kernel_yaml = EXAMPLE_DIR / f"{kernel}.yaml"
            source = EXAMPLE_DIR / str(load_yaml(kernel_yaml)["source"])
            description = str(load_yaml(kernel_yaml).get("description", ""))
            examples[kernel] = Shipped(kernel, description, runs_on, (path, kernel_yaml, source))
    return specs, examples


def _readme(item: Shipped, folder: Path, sweep: Path, kernel: dict | None) -> str:
    run = f"launchtune sweep {folder / sweep.name}"
    reference = (kernel or {}).get("reference")
    if isinstance(reference, str):  # Python the kernel spec names runs only where it is allowed
        run += f" --allow-workload {reference}"
    lines = [
        f"# {item.name}: a copy of launchtune's shipped example, to edit",
        "",
        item.description + ".",
        "",
        f"- `{sweep.name}`: the sweep spec (workload, size, samples or search, repeats, seed); "
        "every key is described in the shipped `default` spec (`launchtune examples default DIR` copies it).",
    ]
    if kernel is not None:
        lines += [
            f"- `{item.files[1].name}`: the kernel spec (tunable parameters, restrictions, arguments, "
            "objective), in Kernel Tuner's vocabulary.",
            f"- `{item.files[2].name}`: the CUDA source the kernel spec names.",
        ]
    lines += [
        "",
        f"Run it ({'a GPU' if item.runs_on == 'GPU' else item.runs_on}):",
        "",
        "```bash",
        run,
        "```",
        "",
        "Results go to `results/<name>/` (the spec's `name`), or to `--out DIR`.",
        "",
    ]
    return "\n".join(lines)


def copy_example(name: str, folder: Path) -> list[Path]:
    """Copy the shipped example or spec ``name`` into ``folder`` (made where missing) with a README saying
    what each file is and how to run it; returns the files written. A file of the same name already in
    ``folder`` is one line, before anything is written: nothing of the user's is replaced."""
    specs, examples = catalogue()
    item = examples.get(name) or specs.get(name)
    if item is None:
        raise UserError(
            f"{name!r}: no such example (examples: {', '.join(examples)}; specs: {', '.join(specs)})"
        )
    example = _kernel_spec(load_yaml(item.files[0])) if name not in examples else None
    if example is not None:  # kernel_convolution, a spec of an example kernel: the whole example
        item = examples[example]
    sweep = item.files[0]
    kernel = load_yaml(item.files[1]) if len(item.files) > 1 else None
    texts = {p.name: p.read_text(encoding="utf-8") for p in item.files}
    # the copied sweep spec names the copied kernel spec beside it, and its comments the copied file
    texts[sweep.name] = (
        texts[sweep.name].replace(SHIPPED_PREFIX, "").replace("cluster_configs/sweeps/", f"{folder}/")
    )
    texts["README.md"] = _readme(item, folder, sweep, kernel)
    clash = [n for n in texts if (folder / n).exists()]
    if clash:
        raise UserError(f"{folder / clash[0]}: exists; copy into a new or empty folder (nothing was written)")
    make_folder(folder, "the example's folder")
    written = []
    for file_name, text in texts.items():
        with atomic_path(folder / file_name) as tmp:
            tmp.write_text(text, encoding="utf-8")
        written.append(folder / file_name)
    return written
