import pytest

from launchtune.kernels.space import Constraint, Inactive, Param, Space, SpaceError


def small_space():
    return Space(
        (Param("a.blocks", (100, 200, 300)), Param("a.threads", (32, 64, 128, 256))),
        default={"a.blocks": 100, "a.threads": 256},
        constraints=(
            Constraint(
                "threads <= 128 when blocks == 300", lambda c: c["a.blocks"] != 300 or c["a.threads"] <= 128
            ),
        ),
    )


def test_grid_respects_constraints():
    space = small_space()
    grid = list(space.grid())
    assert space.cardinality == 12
    assert len(grid) == 11
    assert {"a.blocks": 300, "a.threads": 256} not in grid


def test_sample_is_seeded_distinct_and_valid():
    space = small_space()
    a = space.sample(8, seed=3)
    assert a == space.sample(8, seed=3)
    assert a != space.sample(8, seed=4)
    assert len({tuple(c.values()) for c in a}) == 8
    assert all(space.is_valid(c) for c in a)
    assert len(space.sample(50, seed=0)) == 11  # no more than the space holds


def test_sample_large_space_draws_independently():
    params = tuple(Param(f"k{i}.blocks", tuple(range(100, 1001, 100))) for i in range(8))
    space = Space(params, default={p.name: 100 for p in params})
    configs = space.sample(500, seed=1)
    assert len({tuple(c.values()) for c in configs}) == 500


def _sample_one_call_per_parameter(space, n, seed):
    """The large-space draw as it was written before issue 18: one ``rng.integers`` call per parameter."""
    import numpy as np

    rng = np.random.default_rng(seed)
    seen, out, attempts = set(), [], 0
    while len(out) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            raise SpaceError("constraints reject almost all")
        key = tuple(int(p.values[rng.integers(len(p.values))]) for p in space.params)
        if key in seen:
            continue
        config = dict(zip(space.names, key, strict=True))
        if space.is_valid(config):
            seen.add(key)
            out.append(config)
    return out


def test_large_space_sample_is_the_draw_of_one_call_per_parameter():
    # uneven value counts (one of a single value: drawn without consuming the stream), a constraint that
    # rejects about half, repeats: the batched draw must pick the very same configurations, in order
    params = tuple(Param(f"k{i}.v", tuple(range(1, 2 + (i * 7) % 23))) for i in range(9))
    rejects = Constraint("odd sums only", lambda c: sum(c.values()) % 2 == 1)
    space = Space(params, default={p.name: 1 for p in params}, constraints=(rejects,))
    assert space.cardinality > 2_000_000
    for seed in (0, 1, 7):
        for n in (1, 37, 3000):
            assert space.sample(n, seed) == _sample_one_call_per_parameter(space, n, seed)
    default = {p.name: 1 for p in params}
    only_default = Constraint("the default only", lambda c: c == default)
    never = Space(params, default=default, constraints=(only_default,))
    with pytest.raises(SpaceError, match="constraints reject almost all"):
        never.sample(3, 0)


def test_validate_names_the_problem():
    space = small_space()
    with pytest.raises(SpaceError, match="a.threads=48"):
        space.validate({"a.blocks": 100, "a.threads": 48})
    with pytest.raises(SpaceError, match="unknown parameters: b"):
        space.validate({"a.blocks": 100, "a.threads": 32, "b": 1})
    with pytest.raises(SpaceError, match="threads <= 128"):
        space.validate({"a.blocks": 300, "a.threads": 256})


def test_subspace_fixes_others_at_default():
    space = small_space()
    sub = space.subspace(["a.threads"])
    assert sub.names == ["a.threads"]
    assert len(list(sub.grid())) == 4


def test_default_may_lie_off_the_value_lists():
    space = Space((Param("k.blocks", (100, 200)),), default={"k.blocks": 13312})
    assert space.is_valid({"k.blocks": 13312})
    assert not space.is_valid({"k.blocks": 400})


def test_each_parameter_may_keep_its_default_while_others_are_tuned():
    space = Space(
        (Param("a.blocks", (100, 200)), Param("b.blocks", (100, 200))),
        default={"a.blocks": 13312, "b.blocks": 9},
    )
    assert space.is_valid({"a.blocks": 13312, "b.blocks": 200})
    assert space.is_valid({"a.blocks": 100, "b.blocks": 9})
    assert not space.is_valid({"a.blocks": 13312, "b.blocks": 10})


def test_the_active_key_leaves_out_what_a_choice_does_not_use():
    space = Space(
        (Param("level", (0, 1)), Param("x", (1, 2)), Param("y", (1, 2))),
        {"level": 0, "x": 1, "y": 1},
        inactive=(Inactive("level", (1,), ("x",)),),
    )
    assert space.active_key({"level": 0, "x": 2, "y": 1}) == (0, 2, 1)
    assert space.active_key({"level": 1, "x": 2, "y": 1}) == space.active_key({"level": 1, "x": 1, "y": 1})
    assert space.active_key({"level": 1, "x": 2, "y": 1}) == (1, None, 1)
    assert space.branch({"level": 1, "x": 2, "y": 1}) == (1,)
    assert Space((Param("x", (1, 2)),), {"x": 1}).branch({"x": 2}) == ()


def test_the_unused_mask_is_the_active_key_for_many_configurations():
    import numpy as np

    space = Space(
        (Param("level", (0, 1, 2)), Param("x", (1, 2)), Param("y", (1, 2))),
        {"level": 0, "x": 1, "y": 1},
        inactive=(Inactive("level", (1, 2), ("x",)), Inactive("level", (2,), ("y",))),
    )
    configs = list(space.grid())
    X = np.array([[c[n] for n in space.names] for c in configs])
    mask = space.unused_mask(X)
    assert mask.any(axis=0).tolist() == [False, True, True]
    for config, row in zip(configs, mask, strict=True):
        assert [key is None for key in space.active_key(config)] == row.tolist()
    assert not Space((Param("x", (1, 2)),), {"x": 1}).unused_mask(np.array([[1], [2]])).any()
