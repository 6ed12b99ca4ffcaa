"""``evolve``'s breeding, a batch of children at a time (issue 53): every child a valid configuration, the
nearest to what crossover and mutation bred, the same children for the same seed."""

from __future__ import annotations

import numpy as np

from launchtune.pipeline.strategies.evolve import _breed, _Breeder


def _pool(seed: int = 0) -> np.ndarray:
    """A pool of distinct configurations over 6 parameters of 2-12 values, a third of the product."""
    rng = np.random.default_rng(seed)
    sizes = [2, 3, 5, 12, 4, 8]
    grid = np.stack(np.meshgrid(*[np.arange(n) * 16 for n in sizes], indexing="ij"), -1).reshape(
        -1, len(sizes)
    )
    return grid[rng.random(len(grid)) < 1 / 3]


def test_a_configuration_bred_with_itself_unmutated_is_itself():
    X = _pool()
    breeder = _Breeder(X, np.random.default_rng(1), mutation=0.0)
    rows = np.arange(0, len(X), 7)
    assert np.array_equal(breeder.children(rows, rows), rows)


def test_each_child_is_repaired_to_a_nearest_configuration_ties_at_random():
    X = _pool()
    breeder = _Breeder(X, np.random.default_rng(2))
    breeder.CHUNK_BYTES = 5 * len(X)  # several chunks of 5 children
    values = [np.unique(X[:, j]) for j in range(X.shape[1])]
    rng = np.random.default_rng(3)
    kids = np.stack([rng.integers(len(v), size=40) for v in values])  # codes: one column per child
    bred = np.stack([v[k] for v, k in zip(values, kids, strict=True)], axis=1)
    got = breeder._repair(kids.astype(np.uint8))
    dist = (X[None, :, :] != bred[:, None, :]).sum(axis=2)
    assert np.array_equal(dist[np.arange(len(bred)), got], dist.min(axis=1))
    # where several are nearest, different children with the same values may land on different ones
    same = breeder._repair(np.repeat(kids[:, :1], 200, axis=1).astype(np.uint8))
    assert len(np.unique(same)) == (dist[0] == dist[0].min()).sum() > 1


def test_breeding_gives_distinct_unseen_children_the_same_for_the_same_seed():
    X = _pool()
    parents = np.arange(0, 60, 3)
    seen = {int(i) for i in parents}

    def bred(seed: int) -> set[int]:
        class S:
            rng = np.random.default_rng(seed)

        return _breed(S(), _Breeder(X, S.rng), parents, 30, seen)  # type: ignore[arg-type]

    first = bred(5)
    assert len(first) == 30 and not first & seen and all(0 <= c < len(X) for c in first)
    assert bred(5) == first
    assert bred(6) != first
