"""Cut the committed subset of the Benchmark Hub's convolution caches from a full copy of them.

    python data/benchmark_hub/cut.py FULL_DIR

FULL_DIR holds the hub's ``cachefiles/convolution_milo/<GPU>.json.gz`` (six files). Writes, beside this
script, ``convolution/<GPU>.json.gz`` (every 24th configuration in sorted key order, the same configurations
on every GPU, each entry verbatim) and ``convolution_space.json.gz`` (the keys of all configurations, which
the six caches share). Deterministic: the same input gives the same bytes (gzip without a timestamp).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

STEP = 24
HERE = Path(__file__).resolve().parent


def _write(path: Path, obj: object) -> None:
    path.write_bytes(gzip.compress(json.dumps(obj, indent=0).encode(), mtime=0))


def main(full: Path) -> None:
    paths = sorted(full.glob("*.json.gz"))
    if len(paths) != 6:
        raise SystemExit(f"{full}: expected the six caches of convolution_milo, found {len(paths)}")
    out = HERE / "convolution"
    out.mkdir(exist_ok=True)
    keys: list[str] | None = None
    for path in paths:
        raw = json.loads(gzip.decompress(path.read_bytes()))
        mine = sorted(raw["cache"])
        if keys is None:
            keys, first = mine, raw
        elif mine != keys:
            raise SystemExit(f"{path}: its configurations differ from {paths[0].name}'s")
        raw["cache"] = {k: raw["cache"][k] for k in mine[::STEP]}
        _write(out / path.name, raw)
    assert keys is not None
    space = {k: first[k] for k in ("kernel_name", "problem_size", "tune_params_keys", "tune_params")}
    space["devices"] = [json.loads(gzip.decompress(p.read_bytes()))["device_name"] for p in paths]
    space["configurations"] = keys
    _write(HERE / "convolution_space.json.gz", space)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
