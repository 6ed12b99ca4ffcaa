"""``launchtune examples``: the sweep specs and example kernels that ship with launchtune, and a copy of one
to edit.

Without arguments it lists them; ``launchtune examples NAME DIR`` copies one into DIR (made where missing):
an example kernel's sweep spec, kernel spec and CUDA source, or a shipped sweep spec, with a short README
saying how to run the copy. A shipped spec also runs by name from any folder: ``launchtune sweep default``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """examples:
  launchtune examples                          # what ships, one line each
  launchtune sweep default --samples 50        # a shipped spec, by name, from any folder
  launchtune examples convolution my_conv      # my_conv/: kernel_convolution.yaml, convolution.yaml,
                                               # convolution.cu, README.md
  launchtune examples default my_sweep         # the default spec (every key explained), to edit"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "examples",
        help="list the shipped sweep specs and example kernels, or copy one into a folder to edit",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("name", nargs="?", help="the example or spec to copy (default: list them)")
    p.add_argument("folder", nargs="?", type=Path, help="the folder to copy it into (made where missing)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..errors import UserError
    from ..store.shipped import catalogue, copy_example

    if args.name is None:
        specs, examples = catalogue()
        width = max(map(len, [*specs, *examples]))
        print("sweep specs (run one by name: launchtune sweep NAME):")
        for item in specs.values():
            print(f"  {item.name:<{width}}  {item.runs_on:<10}  {item.description}")
        print("example kernels (copy one to edit: launchtune examples NAME DIR):")
        for item in examples.values():
            print(f"  {item.name:<{width}}  {item.runs_on:<10}  {item.description}")
        return 0
    if args.folder is None:
        raise UserError(
            f"examples {args.name}: name the folder to copy it into (launchtune examples NAME DIR)"
        )
    written = copy_example(args.name, args.folder)
    print(f"copied {', '.join(p.name for p in written)} to {args.folder}/ (README.md says how to run it)")
    return 0
