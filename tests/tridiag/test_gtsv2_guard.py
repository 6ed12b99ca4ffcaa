"""The guard on cuSPARSE gtsv2's workspace query (runs on the CPU: a fake CuPy and a fake libcusparse).

At 10^8 unknowns the query answered a size over 2^63 on the H200 (CUDA 13.2), and ``cp.empty`` raised
``OverflowError: Python int too large to convert to C ssize_t`` from deep inside the benchmark. The baseline
now refuses such an answer with ``GtsvLimitError`` naming the size, on both of its paths (CuPy's bindings and
ctypes), before anything is allocated from it.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from launchtune.kernels.tridiag import gtsv2
from launchtune.kernels.tridiag.gtsv2 import (
    INT_MAX,
    MAX_BYTES_PER_ROW,
    SLACK_BYTES,
    GtsvBaseline,
    GtsvLimitError,
    check_rows,
    checked_buffer_size,
)

N = 10**8
WRAPPED = (1 << 64) - 1_794_967_296  # a negative 32-bit size (-1,794,967,296) sign-extended to size_t


def test_plausible_sizes_pass():
    for nbytes in (0, 1, 128, 24 * N, SLACK_BYTES + MAX_BYTES_PER_ROW * N):
        assert checked_buffer_size(nbytes, N) == nbytes


def test_sign_extended_negative_32_bit_size_is_refused_with_the_reason():
    with pytest.raises(GtsvLimitError) as err:
        checked_buffer_size(WRAPPED, N)
    msg = str(err.value)
    assert "100,000,000" in msg and "overflowed 32 bits" in msg and "-1,794,967,296" in msg
    assert "partition solver" in msg


def test_other_garbage_is_refused():
    with pytest.raises(GtsvLimitError, match="not a size"):
        checked_buffer_size((1 << 64) - (1 << 40), N)  # negative, but not a 32-bit one
    with pytest.raises(GtsvLimitError, match="plausible bound"):
        checked_buffer_size(SLACK_BYTES + MAX_BYTES_PER_ROW * 1000 + 1, 1000)
    with pytest.raises(GtsvLimitError):
        checked_buffer_size(-8, 1000)


def test_rows_over_a_c_int_are_refused():
    check_rows(INT_MAX)
    with pytest.raises(GtsvLimitError, match="C ints"):
        check_rows(INT_MAX + 1)


# -- GtsvBaseline end to end with fakes ---------------------------------------------------------------------
class _Buf:
    """What the baseline uses of a CuPy array: ``.data.ptr``."""

    def __init__(self, nbytes: int):
        if nbytes > (1 << 63) - 1:  # what CuPy does with such a size
            raise OverflowError("Python int too large to convert to C ssize_t")
        self.data = SimpleNamespace(ptr=0x10_0000)
        self.nbytes = nbytes


class _Stream:
    ptr = 0x2000

    def __init__(self, non_blocking: bool = False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass


def _fake_cp() -> SimpleNamespace:
    allocations: list[int] = []

    def empty(shape, dtype=np.float64):
        count = int(np.prod(shape)) if isinstance(shape, tuple) else int(shape)
        nbytes = count * np.dtype(dtype).itemsize
        allocations.append(nbytes)
        return _Buf(nbytes)

    cuda = SimpleNamespace(Stream=_Stream, device=SimpleNamespace(get_cusparse_handle=lambda: 7))
    return SimpleNamespace(empty=empty, cuda=cuda, allocations=allocations)


class _FakeLib:
    """``libcusparse`` through ctypes: the size query writes ``answer`` and returns success."""

    def __init__(self, answer: int):
        self.answer, self.destroyed, self.solves = answer, 0, 0

    def cusparseCreate(self, ref):
        return 0

    def cusparseSetStream(self, handle, stream):
        return 0

    def cusparseDestroy(self, handle):
        self.destroyed += 1
        return 0

    def _size(self, *args):
        args[-1]._obj.value = self.answer  # args[-1] is ctypes.byref(c_size_t)
        return 0

    def _solve(self, *args):
        self.solves += 1
        return 0

    def __getattr__(self, name):
        if name.endswith("_bufferSizeExt"):
            return self._size
        if name.startswith("cusparseDgtsv2"):
            return self._solve
        raise AttributeError(name)


@pytest.fixture
def system() -> np.ndarray:
    abcd = np.ones((4, 1000))
    abcd[0, 0] = abcd[2, -1] = 0.0
    return abcd


@pytest.fixture
def fakes(monkeypatch):
    import launchtune.kernels.tridiag.cuda_solver as cuda_solver

    monkeypatch.setattr(
        cuda_solver, "empty_pinned", lambda cp, shape, dtype=np.float64: np.empty(shape, dtype)
    )
    monkeypatch.setattr(gtsv2, "_binding", lambda cp: None)
    return _fake_cp()


@pytest.mark.parametrize("pivot", [True, False])
def test_ctypes_path_refuses_a_wrapped_size_and_frees_its_handle(monkeypatch, fakes, system, pivot):
    lib = _FakeLib(WRAPPED)
    monkeypatch.setattr(gtsv2, "_libcusparse", lambda: lib)
    with pytest.raises(GtsvLimitError, match="overflowed 32 bits"):
        GtsvBaseline(fakes, system, pivot=pivot)
    assert lib.destroyed == 1
    assert max(fakes.allocations) == 4 * 1000 * 8  # only the system itself: nothing sized by the answer


def test_ctypes_path_keeps_a_plausible_size(monkeypatch, fakes, system):
    lib = _FakeLib(3 * 8 * 1000)
    monkeypatch.setattr(gtsv2, "_libcusparse", lambda: lib)
    base = GtsvBaseline(fakes, system)
    assert base.buffer_bytes == 24_000 and base.via == "ctypes libcusparse" and lib.destroyed == 0


def test_binding_path_raises_rather_than_falling_back(monkeypatch, fakes, system):
    """A wrapped size from CuPy's binding is the library's answer: no ctypes retry (it would get the same)."""
    calls = []
    cs = SimpleNamespace(setStream=lambda handle, stream: None)
    fns = (lambda *a: WRAPPED, lambda *a: calls.append("solve"), lambda *a: WRAPPED, lambda *a: None)
    monkeypatch.setattr(gtsv2, "_binding", lambda cp: (cs, fns))
    monkeypatch.setattr(gtsv2, "_libcusparse", lambda: pytest.fail("fell back to ctypes"))
    with pytest.raises(GtsvLimitError, match="cusparseDgtsv2_bufferSizeExt"):
        GtsvBaseline(fakes, system)
    assert calls == []


def test_a_binding_that_fails_otherwise_still_falls_back_to_ctypes(monkeypatch, fakes, system):
    def broken(*args):
        raise TypeError("signature differs")

    cs = SimpleNamespace(setStream=lambda handle, stream: None)
    monkeypatch.setattr(gtsv2, "_binding", lambda cp: (cs, (broken, broken, broken, broken)))
    monkeypatch.setattr(gtsv2, "_libcusparse", lambda: _FakeLib(8000))
    base = GtsvBaseline(fakes, system)
    assert base.via == "ctypes libcusparse (bindings failed: TypeError)" and base.buffer_bytes == 8000


def test_rows_checked_before_any_allocation(fakes):
    class Huge:
        shape = (4, INT_MAX + 1)

        def __getitem__(self, key):
            return 0.0

    with pytest.raises(GtsvLimitError, match="C ints"):
        GtsvBaseline(fakes, Huge())  # type: ignore[arg-type]
    assert fakes.allocations == []


def test_ctypes_byref_carries_the_value():
    """The fake writes through ``byref(...)._obj``; make sure that is how ctypes exposes it here."""
    size = ctypes.c_size_t()
    ctypes.byref(size)._obj.value = 5
    assert size.value == 5
