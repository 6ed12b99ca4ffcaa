"""The A/B harness of fused.cu revisions (lab/cfd_kernel_ab.py): how it names the versions it compiles."""

from __future__ import annotations

import pytest


def test_kernel_ab_versions_are_the_tree_with_defines_and_bad_ones_are_refused():
    from lab.cfd_kernel_ab import parse_versions

    versions = parse_versions(["p1=STAGE_PREFETCH=1,FACES=2", "plain="], "TREE")
    assert versions == {"p1": "#define STAGE_PREFETCH 1\n#define FACES 2\nTREE", "plain": "TREE"}
    assert parse_versions([], "TREE") == {"tree": "TREE"}
    for bad in (["base=X=1"], ["p=1x=2"], ["p=X"], ["p=X=1", "p=Y=1"], ["=X=1"]):
        with pytest.raises(SystemExit):
            parse_versions(bad, "TREE")
