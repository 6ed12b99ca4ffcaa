import pytest

from kernels.space import Constraint, Param, Space, SpaceError


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
