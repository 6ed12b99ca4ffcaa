"""What a benchmark's dry run checks, without a GPU: the specs it reads or writes, through the project's own
loaders, so a change that makes the project refuse one fails on a CPU (``tests/benchmarks/test_dry_run.py``).

    python -m benchmarks.dry_run cluster_configs/sweeps/kernel_convolution.yaml   # sweep specs, each checked

A sweep spec is read as ``launchtune sweep`` reads it (``load_spec``: its workload's case, size and options,
a kernel spec with its source and arrays); a ``*_gpu.sh`` script run with ``DRY_RUN=1`` calls this where it
would run ``launchtune sweep`` on the GPU. The Python benchmarks' ``--dry-run`` use ``kernel_space`` for the
example kernels they build. Each line printed starts ``dry run: <module>:``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import run_main
from launchtune.kernels.kernel.options import check_arguments
from launchtune.kernels.kernel.spec import load_kernel_spec
from launchtune.kernels.space import Space
from launchtune.kernels.workload import WorkloadError
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import load_spec


def done(module: str, what: str) -> int:
    """The one line a dry run ends with (the test looks for each module's), exit code 0."""
    print(f"dry run: {module}: {what}", flush=True)
    return 0


def kernel_space(spec: str | Path, size: str) -> Space:
    """The ``kernel`` workload's checks before it is built on a GPU (the kernel spec, its source, its default
    configuration's arrays at ``size``) and its launch space; a refusal is a ``UserError`` naming the spec."""
    try:
        check_arguments("dry_run", size, spec=str(spec))
        kernel = load_kernel_spec(spec)
        return kernel.space(kernel.problem(size))
    except (WorkloadError, ValueError) as exc:
        raise UserError(f"{spec}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("specs", type=Path, nargs="+", help="sweep spec YAML files")
    args = p.parse_args(argv)
    for path in args.specs:
        spec = load_spec(path)
        done("benchmarks.dry_run", f"{path}: workload {spec.workload}, size {spec.size}, checked")
    return 0


if __name__ == "__main__":
    run_main(main)
