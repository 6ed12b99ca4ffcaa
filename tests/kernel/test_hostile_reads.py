"""What a kernel spec reads, read as it may be: a spec and its source bounded in bytes before a byte is
read, the source beside the spec (not ``/etc/passwd``), regular files only (a FIFO is one line, not a hang),
nesting and integers capped; every refusal one line naming the spec and the field."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from numpy.lib import format as npy

from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.spec import MAX_SPEC_BYTES, check_for_problem, load_kernel_spec
from launchtune.pipeline.errors import UserError
from launchtune.pipeline.store.spec import load_spec
from tests.pipeline.conftest import REPO


def _refused(path, *words: str) -> str:
    with pytest.raises(SpecError) as info:
        load_kernel_spec(path)
    line = str(info.value)
    assert "\n" not in line and all(w in line for w in words), line
    return line


@pytest.mark.parametrize("source", ["/etc/passwd", "../outside.cu", "link.cu"])
def test_the_source_is_a_file_beside_the_spec(tmp_path, write_spec, source):
    (tmp_path / "spec").mkdir()
    (tmp_path / "outside.cu").write_text("__global__ void scale(float *x) {}")
    (tmp_path / "spec" / "link.cu").symlink_to(tmp_path / "outside.cu")
    spec = write_spec("spec/kernel.yaml", source=source)
    _refused(spec, f"{spec}: source: {source!r} is outside the spec's folder")


def test_a_source_that_is_a_fifo_a_loop_or_too_large_is_one_line(tmp_path, write_spec):
    os.mkfifo(tmp_path / "fifo.cu")
    _refused(write_spec(source="fifo.cu"), "source: ", "a FIFO where a CUDA source file belongs")
    (tmp_path / "loop.cu").symlink_to(tmp_path / "loop.cu")
    _refused(write_spec(source="loop.cu"), "source: 'loop.cu' is not a usable path")
    with open(tmp_path / "big.cu", "wb") as f:
        f.truncate(5 * 1024 * 1024)
    _refused(write_spec(source="big.cu"), "big.cu: 5,242,880 bytes; a CUDA source file holds at most")
    (tmp_path / "dir.cu").mkdir()
    _refused(write_spec(source="dir.cu"), "a directory where a CUDA source file belongs")


def test_a_spec_that_is_a_fifo_or_a_loop_is_one_line(tmp_path):
    os.mkfifo(tmp_path / "k.yaml")
    _refused(tmp_path / "k.yaml", "a FIFO where a kernel spec file belongs")
    (tmp_path / "l.yaml").symlink_to(tmp_path / "l.yaml")
    _refused(tmp_path / "l.yaml", "l.yaml: cannot read this kernel spec file")


def test_a_huge_spec_is_refused_before_it_is_read(tmp_path):
    """A sparse 4 GB spec, read under a 1 GB address-space limit: refused by its size, never loaded."""
    spec = tmp_path / "huge.yaml"
    with open(spec, "wb") as f:
        f.truncate(4 << 30)
    code = (
        "import resource; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from launchtune.kernels.kernel.spec import load_kernel_spec\n"
        f"load_kernel_spec({str(spec)!r})"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert f"SpecError: {spec}: 4,294,967,296 bytes; a kernel spec file holds at most" in lines[-1]
    assert "MemoryError" not in done.stderr
    assert MAX_SPEC_BYTES < 4 << 30


def test_deep_nesting_and_long_integers_are_one_line(tmp_path, write_spec):
    deep = tmp_path / "deep.yaml"
    deep.write_text("source: scale.cu\nrestrictions: " + "[" * 20_000 + "]" * 20_000 + "\n")
    _refused(deep, "nested deeper than 32 levels")
    digits = tmp_path / "digits.yaml"
    digits.write_text("problem_size: " + "7" * 5000 + "\n")
    _refused(
        digits,
        "digits.yaml: malformed YAML (line 1, column 15): an integer of 5,000 characters "
        "(at most 4,300 digits)",
    )
    _refused(write_spec(tune_params={"block_size_x": [32, 2**70]}), "tune_params.block_size_x: 1.18e+21")
    _refused(write_spec(problem_size=[2**64]), "problem_size: expected one to three positive integers")
    spec = load_kernel_spec(write_spec())
    for size in ("9" * 5000, "1x" + "9" * 30, "99999999999999999999"):
        with pytest.raises(SpecError, match="expected up to three positive extents"):
            spec.problem(size)


def _checked(path) -> None:
    """What the sweep runs on the CPU before any cluster starts (``kernels.kernel.workload``)."""
    spec = load_kernel_spec(path)
    check_for_problem(spec, spec.problem(None), None)


def _npy_arg(name: str = "in.npy", dtype: str = "float32") -> list[dict]:
    return [
        {"name": "out", "dtype": "float32", "shape": ["problem_size_x"], "output": True},
        {"name": "in", "dtype": dtype, "shape": "problem_size_x", "fill": {"npy": name}},
        {"name": "n", "dtype": "int32", "value": "problem_size_x"},
    ]


@pytest.mark.parametrize(
    ("value", "dtype", "why"),
    [
        ("2**40", "int32", "arguments[1].value: '2**40' = 1.09951e+12 is not a int32 value"),
        ("-1", "uint32", "'-1' = -1 is not a uint32 value"),
        ("1/0", "int32", "arguments[1].value: '1/0': division by zero"),
        ("1.5", "int64", "'1.5' = 1.5 is not a int64 value"),
        ("10.0**300", "float32", "is not a float32 value"),
        ("2**1100", "float64", "is not a float64 value"),
    ],
)
def test_a_scalar_its_dtype_cannot_hold_is_refused_on_the_cpu(write_spec, value, dtype, why):
    args = _npy_arg()[:1] + [{"name": "n", "dtype": dtype, "value": value}]
    with pytest.raises(SpecError, match=re.escape(why)):
        _checked(write_spec(arguments=args))


@pytest.mark.parametrize(
    ("fill", "why"),
    [
        ({"uniform": [float("nan"), float("inf")]}, "fill.uniform: expected finite numbers"),
        ({"normal": [0, -1]}, "fill.normal: the standard deviation -1.0 must be >= 0"),
        ({"constant": 300}, "fill.constant: 300 is not a int8 value"),
        ({"constant": 2**70}, "fill.constant: 1180591620717411303424 is not a int8 value"),
    ],
)
def test_fills_that_would_fail_on_the_worker_are_refused_with_the_spec(write_spec, fill, why):
    args = [{"name": "a", "dtype": "int8", "shape": "problem_size_x", "fill": fill}]
    with pytest.raises(SpecError, match=re.escape(why)):
        load_kernel_spec(write_spec(arguments=args))


def test_npy_fills_are_checked_from_their_header_before_anything_loads(tmp_path, write_spec):
    good = np.arange(1000, dtype=np.float32)
    np.save(tmp_path / "in.npy", good)
    _checked(write_spec(arguments=_npy_arg()))
    np.save(tmp_path / "short.npy", good[:10])
    with pytest.raises(SpecError, match=re.escape("short.npy holds float32[10], declared float32[1000]")):
        _checked(write_spec(arguments=_npy_arg("short.npy")))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    _refused(write_spec(arguments=_npy_arg("objects.npy")), "objects.npy holds object; a fill is one of")
    (tmp_path / "garbage.npy").write_bytes(b"\x93NUMPY\x01\x00garbage" + os.urandom(64))
    _refused(write_spec(arguments=_npy_arg("garbage.npy")), "garbage.npy is not a .npy array")
    (tmp_path / "text.npy").write_text("hello")
    _refused(write_spec(arguments=_npy_arg("text.npy")), "text.npy is not a .npy array")
    huge = tmp_path / "huge.npy"  # a 128-byte header claiming 8 TB
    with open(huge, "wb") as f:
        npy.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    _refused(write_spec(arguments=_npy_arg("huge.npy")), "huge.npy claims 8,000,000,000,000 bytes")
    with open(tmp_path / "cut.npy", "wb") as f:
        npy.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (1000,)})
        f.write(b"\0" * 100)
    _refused(write_spec(arguments=_npy_arg("cut.npy")), "cut.npy holds 100 bytes of data, its header")
    (tmp_path / "loop.npy").symlink_to(tmp_path / "loop.npy")
    _refused(write_spec(arguments=_npy_arg("loop.npy")), "fill.npy: 'loop.npy' is not a usable path")
    os.mkfifo(tmp_path / "fifo.npy")
    _refused(write_spec(arguments=_npy_arg("fifo.npy")), "a FIFO where a npy file belongs")


def test_the_worker_builds_only_the_spec_the_sweep_checked(tmp_path, write_spec):
    """The sweep pins the kernel spec it checked (and allowed the Python of) by its digest; a worker handed
    those options refuses a spec or source replaced since, before it compiles or imports anything."""
    from launchtune.kernels.kernel.options import code_references
    from launchtune.kernels.kernel.workload import KernelWorkload
    from launchtune.kernels.workload import WorkloadError
    from tests.kernel.test_cli import _sweep

    write_spec()
    options = load_spec(_sweep(tmp_path)).options
    assert re.fullmatch("[0-9a-f]{64}", options["spec_sha256"])
    with pytest.raises(WorkloadError, match="no GPU visible"):  # the same spec: on to the device check
        KernelWorkload("scale", "1000", backend="numpy", **options)
    write_spec(reference="evil.module:run")  # the spec replaced after the check: names Python now
    for build in (
        lambda: KernelWorkload("scale", "1000", backend="numpy", **options),
        lambda: code_references(**options),
    ):
        with pytest.raises(WorkloadError, match="changed since the sweep checked it") as info:
            build()
        assert info.value.field == "options.spec"
    write_spec()
    (tmp_path / "scale.cu").write_text((tmp_path / "scale.cu").read_text() + "\n// changed\n")
    with pytest.raises(WorkloadError, match=r"\(or its source scale.cu\) changed since"):
        KernelWorkload("scale", "1000", backend="numpy", **options)
    with pytest.raises(UserError, match="options.spec_sha256: expected a sha256"):
        load_spec(_sweep(tmp_path, options={"spec": "kernel.yaml", "spec_sha256": "x"}))
