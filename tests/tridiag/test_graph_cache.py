"""The bounded LRU cache that holds captured CUDA graphs (host logic only: runs on the CPU)."""

from __future__ import annotations

import pytest

from launchtune.kernels.tridiag.graph_cache import GraphCache


def test_builds_once_per_key_and_reuses():
    cache, calls = GraphCache(limit=2), []

    def build(tag):
        def make():
            calls.append(tag)
            return object()

        return make

    first = cache.get(("a", 1), build("a"))
    assert cache.get(("a", 1), build("a-again")) is first
    assert calls == ["a"] and cache.builds == 1 and len(cache) == 1


def test_least_recently_used_is_evicted():
    cache = GraphCache(limit=2)
    a = cache.get("a", lambda: "A")
    cache.get("b", lambda: "B")
    assert cache.get("a", lambda: "A2") == a  # "a" is now the most recent
    cache.get("c", lambda: "C")  # evicts "b"
    assert "b" not in cache and "a" in cache and "c" in cache
    assert cache.get("b", lambda: "B2") == "B2"  # rebuilt
    assert cache.builds == 4 and len(cache) == 2


def test_failed_build_stores_nothing():
    cache = GraphCache(limit=3)

    def boom():
        raise RuntimeError("capture failed")

    with pytest.raises(RuntimeError, match="capture failed"):
        cache.get("k", boom)
    assert "k" not in cache and cache.builds == 0
    assert cache.get("k", lambda: 1) == 1


def test_bad_limit():
    with pytest.raises(ValueError, match="limit"):
        GraphCache(limit=0)
