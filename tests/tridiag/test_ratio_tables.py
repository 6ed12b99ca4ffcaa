"""The ratio tables are rendered from the CSV and meta.json, whatever the numbers (CPU only)."""

from __future__ import annotations

import csv
import json

from benchmarks.tridiag_ratio_tables import table


def _folder(tmp_path, floor: bool):
    meta = {
        "device": {"device_name": "GPU X", "cuda_runtime": 1, "cuda_driver": 2},
        "cupy": "14",
        "numpy": "2",
        "date": "d",
        "commit": "abc",
        "rounds": 7,
        "confidence": 0.95,
    }
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    row = {"size": 1000, "a": "nopivot", "b": "graph_m10", "ratio": 0.9713, "low": 0.96, "high": 0.98}
    row |= {"verdict": "faster", "a_ms": 0.2, "b_ms": 0.19}
    if floor:
        row["b_over_serial_floor"] = 1.0412
    with (tmp_path / "ratios.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(row))
        w.writeheader()
        w.writerow(row)
    return tmp_path


def test_table_carries_interval_verdict_and_provenance(tmp_path):
    text = table(_folder(tmp_path, floor=False))
    assert "GPU X" in text and "commit abc" in text and "7 interleaved rounds" in text
    assert "| 1,000 | graph_m10 / nopivot | 0.1900 | 0.2000 | 0.971 [0.960, 0.980] | faster |" in text
    assert "serial floor" not in text


def test_table_with_floor_column(tmp_path):
    text = table(_folder(tmp_path, floor=True))
    assert text.splitlines()[2].endswith("B / serial floor |")
    assert text.splitlines()[-1].endswith("| 1.041 |")
