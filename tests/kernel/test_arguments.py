"""Arguments made from their declarations: seeded (the same arrays twice, another seed other arrays), every
fill, scalars of the declared dtype, sizes known before anything is allocated."""

from __future__ import annotations

import numpy as np
import pytest

from launchtune.kernels.kernel.arguments import make_host, nbytes
from launchtune.kernels.kernel.errors import SpecError
from launchtune.kernels.kernel.spec import load_kernel_spec


def _arrays(spec, seed):
    values = spec.values(spec.problem(None))
    return [make_host(a, i, values, seed) for i, a in enumerate(spec.arguments)]


def test_seeded_arrays_are_the_same_twice_and_differ_by_seed(write_spec):
    spec = load_kernel_spec(write_spec())
    first, again, other = _arrays(spec, 0), _arrays(spec, 0), _arrays(spec, 1)
    out, data, n = first
    assert out.dtype == np.float32 and out.shape == (1000,) and not out.any()
    assert data.dtype == np.float32 and -1 <= data.min() < data.max() <= 1
    assert isinstance(n, np.int32) and n == 1000
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a, b)
    assert not np.array_equal(first[1], other[1])


def test_two_arguments_with_one_fill_get_different_values(write_spec):
    spec = load_kernel_spec(
        write_spec(
            arguments=[
                {"name": "a", "dtype": "float32", "shape": [100], "fill": "uniform"},
                {"name": "b", "dtype": "float32", "shape": [100], "fill": "uniform"},
            ]
        )
    )
    a, b = _arrays(spec, 0)
    assert not np.array_equal(a, b)


def test_every_fill(tmp_path, write_spec):
    np.save(tmp_path / "weights.npy", np.arange(6, dtype=np.float64).reshape(2, 3))
    spec = load_kernel_spec(
        write_spec(
            arguments=[
                {"name": "z", "dtype": "int16", "shape": [2, 3], "fill": "zeros"},
                {"name": "u", "dtype": "float64", "shape": [500], "fill": {"uniform": [5, 6]}},
                {"name": "g", "dtype": "float64", "shape": [5000], "fill": {"normal": [10, 0.5]}},
                {"name": "c", "dtype": "float32", "shape": [4], "fill": {"constant": 2.5}},
                {"name": "r", "dtype": "int32", "shape": [2, 3], "fill": "arange"},
                {"name": "w", "dtype": "float64", "shape": [2, 3], "fill": {"npy": "weights.npy"}},
                {"name": "s", "dtype": "float64", "value": "problem_size_x / 4"},
                {"name": "k", "value": "block_size_x", "dtype": "int64"},
            ],
            tune_params={"block_size_x": [64], "tile": [1, 2]},
        )
    )
    z, u, g, c, r, w, s, k = _arrays(spec, 3)
    assert z.dtype == np.int16 and not z.any()
    assert 5 <= u.min() and u.max() < 6
    assert abs(g.mean() - 10) < 0.05 and abs(g.std() - 0.5) < 0.05
    assert c.tolist() == [2.5] * 4
    assert r.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert np.array_equal(w, np.arange(6.0).reshape(2, 3))
    assert isinstance(s, np.float64) and s == 250.0
    assert isinstance(k, np.int64) and k == 64  # a parameter with one value may size or set an argument
    assert nbytes(spec.arguments, spec.values(spec.problem(None))) == 12 + 4000 + 40000 + 16 + 24 + 48


def test_a_npy_file_of_another_shape_is_named(tmp_path, write_spec):
    np.save(tmp_path / "weights.npy", np.zeros((3, 3)))
    spec = load_kernel_spec(
        write_spec(
            arguments=[{"name": "w", "dtype": "float64", "shape": [2, 3], "fill": {"npy": "weights.npy"}}]
        )
    )
    with pytest.raises(SpecError, match=r"arguments\[0\].fill: weights.npy holds float64\[3, 3\], declared"):
        _arrays(spec, 0)


def test_shapes_that_cannot_be_are_refused(write_spec):
    spec = load_kernel_spec(
        write_spec(arguments=[{"name": "o", "dtype": "float32", "shape": ["problem_size_x - 1000"]}])
    )
    with pytest.raises(SpecError, match=r"arguments\[0\].shape\[0\]: 'problem_size_x - 1000' = 0; an extent"):
        nbytes(spec.arguments, spec.values(spec.problem(None)))
    spec = load_kernel_spec(
        write_spec(arguments=[{"name": "o", "dtype": "float64", "shape": ["problem_size_x ** 4"]}])
    )
    with pytest.raises(SpecError, match=r"arguments\[0\]: 8,000,000,000,000 bytes \(at most"):
        nbytes(spec.arguments, spec.values(spec.problem(None)))
