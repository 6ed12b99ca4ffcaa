"""``launchtune notebooks``: execute the notebooks in notebooks/ headless against a results folder and
write the executed copies (with their figures) to an output folder, each as a .ipynb and as a .html page any
browser opens (nbconvert); the notebooks themselves stay unexecuted.

Each notebook reads the results folder from $LAUNCHTUNE_NOTEBOOK_RESULTS in its first cell (default: the
committed data/), which this command sets. A cell that raises stops that notebook: the command names the
notebook and the cell, keeps the partly executed copy for a look, goes on with the others and exits with 1.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from importlib.resources import files
from pathlib import Path
from typing import Any

from ..errors import UserError

# Package data: a wheel installs it as plain files, so the folder is a real path.
NOTEBOOK_DIR = Path(str(files("launchtune.notebooks")))
DEFAULT_OUT = Path("results/notebooks")
EPILOG = """examples:
  launchtune notebooks                                   # all of them, on data/ (a checkout's)
  launchtune notebooks 01 --results results/             # the sweep overview of the sweeps in results/
  launchtune notebooks 02 --results results/ --out /tmp/nb   # one, on your own sweeps
  make notebooks"""


class NotebookError(UserError):
    """A notebook cell failed: not the user's input but the notebook (or the data it met) is wrong."""

    exit_code = 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "notebooks",
        help="execute the notebooks headless against a results folder",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "names",
        nargs="*",
        help="notebooks to run, by name or number prefix (01, 02_surrogates); default: all in notebooks/",
    )
    p.add_argument(
        "--results",
        type=Path,
        help="results folder the notebooks read: sweep folders, tridiag/, autotune/ (default: a checkout's "
        "committed data/; installed from a wheel, name one)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"folder for the executed copies, .ipynb and .html (default: {DEFAULT_OUT}/, git-ignored)",
    )
    p.add_argument("--timeout", type=int, default=600, help="seconds one cell may take (default 600)")
    p.set_defaults(func=run)


def install_hint(extra: str) -> str:
    """The install that adds ``extra``'s packages where this launchtune runs: in a checkout (an editable
    install, the repository's pyproject.toml beside the package) the project's test extras, which hold them;
    else the installed package's extra."""
    root = Path(str(files("launchtune"))).resolve().parent
    if (root / "pyproject.toml").is_file() and (root / "pipeline").is_dir():
        return f"pip install -e '.[test]' (in {root})"
    return f"pip install 'launchtune[{extra}]'"


def notebook_paths(names: list[str] | None = None, folder: Path = NOTEBOOK_DIR) -> list[Path]:
    """The notebooks of ``folder`` in name order, or those whose name or number prefix is in ``names``."""
    found = sorted(folder.glob("[0-9]*.ipynb"))
    if not names:
        if not found:
            raise UserError(f"{folder}: no notebooks")
        return found
    out = []
    for name in names:
        stem = Path(name).stem
        match = [p for p in found if p.stem == stem or p.stem.split("_", 1)[0] == stem]
        if not match:
            raise UserError(f"notebook {name!r}: not in {folder} (there: {', '.join(p.stem for p in found)})")
        out += [p for p in match if p not in out]
    return out


def execute_notebook(
    path: Path, results: Path | None = None, out: Path | None = None, timeout: int = 600
) -> tuple[Any, float]:
    """Run one notebook in a fresh kernel, working directory its own folder, reading ``results``; returns the
    executed notebook and the seconds it took. The executed copy is written to ``out`` if given, also when a
    cell fails (so its traceback can be read there); a failure raises ``NotebookError`` naming the cell."""
    try:
        import nbformat
        from jupyter_client.kernelspec import NoSuchKernel
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
        from nbconvert import HTMLExporter
    except ImportError as exc:
        raise UserError(
            f"running notebooks needs nbclient, nbformat, nbconvert and ipykernel ({exc.name} is missing): "
            f"{install_hint('notebooks')}"
        ) from None
    from ..results import RESULTS_ENV, results_folder

    results = results_folder(results)
    nb = nbformat.read(path, as_version=4)
    current: dict[str, int] = {}

    def on_cell_start(cell: Any, cell_index: int, **_: Any) -> None:
        current["index"] = cell_index

    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the kernel's inline backend draws
    env[RESULTS_ENV] = str(results)
    env.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # silences ipykernel's debugger warning
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=nb.metadata.get("kernelspec", {}).get("name", "python3"),
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_start=on_cell_start,
    )
    t0 = time.perf_counter()
    failure = None
    # The kernel talks over Unix sockets in a private temporary folder rather than loopback TCP ports, which
    # any user of a shared login node could connect to (the messages are signed, not encrypted).
    with tempfile.TemporaryDirectory(prefix="launchtune-kernel-") as sockets:
        try:
            client.km = client.create_kernel_manager()
            client.km.transport, client.km.ip = "ipc", str(Path(sockets) / "kernel")
            client.execute(env=env)
        except NoSuchKernel as exc:
            raise UserError(f"{path.name}: no Jupyter kernel {exc.name!r}: pip install ipykernel") from None
        except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
            failure = exc
    seconds = time.perf_counter() - t0
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, out / path.name)
        # the same executed copy as one self-contained page (figures inline), for a machine with no Jupyter
        html, _ = HTMLExporter().from_notebook_node(nb)
        (out / path.name).with_suffix(".html").write_text(html, encoding="utf-8")
    if failure is not None:
        index = current.get("index", -1)
        cell = nb.cells[index] if 0 <= index < len(nb.cells) else None
        first = next((ln for ln in (cell.source if cell else "").splitlines() if ln.strip()), "")
        what = (
            f"{failure.ename}: {failure.evalue}"
            if isinstance(failure, CellExecutionError)
            else f"{type(failure).__name__}: {str(failure).splitlines()[0] if str(failure) else ''}"
        )
        where = f" (executed copy: {out / path.name})" if out is not None else ""
        raise NotebookError(
            f"{path.name}: cell {index} (`{first.strip()[:60]}`) failed after {seconds:.1f} s: {what}{where}"
        )
    return nb, seconds


def run(args: argparse.Namespace) -> int:
    from ..results import results_folder

    paths = notebook_paths(args.names)
    results = results_folder(args.results)  # a wrong folder is the user's mistake: one line, exit 2
    print(f"notebooks on {results}, executed copies (.ipynb and .html) in {args.out}/", flush=True)
    failed = []
    for path in paths:
        try:
            _, seconds = execute_notebook(path, results, args.out, args.timeout)
        except NotebookError as exc:
            print(f"error: {exc}", flush=True)
            failed.append(path.name)
            continue
        page = (args.out / path.name).with_suffix(".html")
        print(f"{path.name}: ok in {seconds:.1f} s -> {args.out / path.name}, {page}", flush=True)
    if failed:
        raise NotebookError(f"{len(failed)} of {len(paths)} notebooks failed: {', '.join(failed)}")
    return 0
