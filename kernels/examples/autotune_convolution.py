"""A user's program that runs the example convolution thousands of times, every launch through ``autotune``.

    python -m launchtune.kernels.examples.autotune_convolution --launches 10000 \\
        --table data/convolution/h100/sweep     # seeded: that sweep's picks for this GPU class come first

Each step convolves the image (``convolution.cu``, a 15 x 15 filter) and smooths the image with the answer
(its interior becomes the output over the filter's sum), so every launch's answer feeds the next and the final
image is a checksum of the whole run: a launch lost, doubled or computed differently changes it. ``--untuned``
runs the same program with the kernel compiled once in its default configuration, as a plain CuPy program
would; the two checksums agree bit for bit (every configuration sums in the same order).

The first run tunes (a scan of the table's picks, or ``--scan N`` configurations from scratch) and remembers
its pick in ``$XDG_CACHE_HOME/launchtune/autotune.json``; the next run locks it at its first launch.
``--sizes 4096x4096:3000,2048x2048:3000,4096x4096:3000`` changes the image size mid-run (one tuning per
size). It prints one JSON object: the tuner's statistics per size, the checksum, the wall and kernel time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

SPEC = Path(__file__).with_name("convolution.yaml")
FILTER = 15


def tuned_convolution(**options: Any) -> Any:
    """The example's kernel wrapped by ``autotune``: the kernel spec as it is, one tuning per image shape."""
    from ..autotune import autotune

    return autotune(
        spec=SPEC, key=lambda out, image, filter_, width, height: (out.shape, str(out.dtype)), **options
    )


def untuned_convolution() -> Any:
    """The same kernel without a tuner: compiled once per size in the spec's default configuration."""
    import cupy as cp

    from ..kernel.compile import build_function, source_with_defines
    from ..kernel.spec import load_kernel_spec

    spec = load_kernel_spec(SPEC)
    modules: dict[tuple[int, int, int], Any] = {}

    def launch(out: Any, image: Any, filter_: Any, width: Any, height: Any) -> None:
        problem = (int(width), int(height), 1)
        if problem not in modules:
            source = source_with_defines(spec.code, spec.defines(spec.default, problem))
            module, function = build_function(cp, source, spec.compiler_options, spec.kernel_name)
            modules[problem] = (
                module,
                function,
                cp.ndarray((FILTER, FILTER), cp.float32, module.get_global("d_filter")),
            )
        _, function, constant = modules[problem]
        constant[...] = filter_
        function(
            spec.grid(spec.default, problem), spec.block(spec.default), (out, image, filter_, width, height)
        )

    return launch


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
    """``4096x4096:3000,2048x2048:100`` -> [(4096, 4096, 3000), (2048, 2048, 100)]."""
    out = []
    for part in text.split(","):
        size, _, count = part.partition(":")
        w, _, h = size.lower().partition("x")
        if not (w.isdigit() and h.isdigit() and count.isdigit()) or min(int(w), int(h), int(count)) < 1:
            raise ValueError(f"--sizes: {part!r} is not WIDTHxHEIGHT:LAUNCHES")
        out.append((int(w), int(h), int(count)))
    return out


def run(kernel: Any, sizes: Sequence[tuple[int, int, int]], seed: int = 0) -> dict[str, Any]:
    """The program: per size its own image (kept when the size comes back), ``launches`` steps each."""
    import cupy as cp

    state: dict[tuple[int, int], tuple[Any, Any, Any, float]] = {}
    start = time.perf_counter()
    for width, height, launches in sizes:
        if (width, height) not in state:
            rng = np.random.default_rng([seed, width, height])
            image = cp.asarray(
                rng.uniform(0, 1, (height + FILTER - 1, width + FILTER - 1)).astype(np.float32)
            )
            filter_ = cp.asarray(rng.uniform(0, 1, (FILTER, FILTER)).astype(np.float32))
            out = cp.zeros((height, width), cp.float32)
            state[(width, height)] = (image, filter_, out, float(np.float32(1.0 / float(filter_.sum()))))
        image, filter_, out, scale = state[(width, height)]
        w, h, halo = np.int32(width), np.int32(height), FILTER // 2
        for _ in range(launches):
            kernel(out, image, filter_, w, h)
            image[halo:-halo, halo:-halo] = out * scale  # the next launch convolves this one's answer
    cp.cuda.Device().synchronize()
    wall = time.perf_counter() - start
    digest = hashlib.sha256()
    for _size, (image, *_rest) in sorted(state.items()):
        digest.update(cp.asnumpy(image).tobytes())
    return {
        "checksum": digest.hexdigest()[:16],
        "wall_s": round(wall, 3),
        "launches": sum(s[2] for s in sizes),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m launchtune.kernels.examples.autotune_convolution",
        description="The example convolution in a time loop, each launch through autotune.",
    )
    parser.add_argument("--launches", type=int, default=10_000, help="steps at --size (default 10000)")
    parser.add_argument("--size", default="4096x4096", help="image WIDTHxHEIGHT (default 4096x4096)")
    parser.add_argument("--sizes", help="a schedule WxH:LAUNCHES,... instead of --size/--launches")
    parser.add_argument("--table", help="a sweep folder or tuning table whose picks seed the tuner")
    parser.add_argument("--scan", type=int, default=64, help="without a table: configurations to scan (64)")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache of picks")
    parser.add_argument(
        "--verify", action="store_true", help="check each candidate's output against the default"
    )
    parser.add_argument("--untuned", action="store_true", help="the default configuration, no tuner")
    args = parser.parse_args(argv)
    try:
        sizes = parse_sizes(args.sizes or f"{args.size}:{args.launches}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.table and not Path(args.table).exists():
        print(f"error: --table: no such sweep folder or tuning table {args.table}", file=sys.stderr)
        return 2
    from ..backend import gpu_count

    if gpu_count() == 0:
        print("error: this example runs CUDA: no GPU is visible", file=sys.stderr)
        return 2
    if args.untuned:
        print(json.dumps(run(untuned_convolution(), sizes), indent=1))
        return 0
    kernel = tuned_convolution(table=args.table, scan=args.scan, cache=not args.no_cache, verify=args.verify)
    result = run(kernel, sizes)
    result["tuning"] = kernel.stats()
    kernel.close()
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
