"""Type maps built with Python lists (the few-runs path) equal those built with numpy.

`TypeMap` builds maps of at most ``_SMALL`` runs with lists (numpy's per-call cost dominates
for the few runs most types have) and larger ones with numpy; every constructor step --
merging runs, ``blocks`` (dense and not), ``replicate``, ``concat`` -- must give the same runs,
bounds, sizes and basic kind either way.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.mpi.datatype import typemap as tm_module
from emucluster.mpi.datatype.datatype import predefined
from emucluster.mpi.datatype.typemap import TypeMap

KINDS = [int(predefined[n].typemap.kinds[0]) for n in ("BYTE", "INT", "DOUBLE", "SHORT")]

runs = st.lists(
    st.tuples(st.integers(-64, 64), st.sampled_from(KINDS), st.integers(0, 3)), max_size=8
)
blocks = st.lists(st.tuples(st.integers(0, 3), st.integers(-40, 40)), max_size=6)


def _fields(m: TypeMap) -> tuple[object, ...]:
    return (m.disps.tolist(), m.kinds.tolist(), m.counts.tolist(), m.lb, m.ub, m.size,
            m.elements, m.true_lb, m.true_ub, m.homogeneous(), m.contiguous)  # fmt: skip


def _both(build: object) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """``build()``'s map on the list path and on the numpy path."""
    assert callable(build)
    small = _fields(build())
    saved = tm_module._SMALL
    tm_module._SMALL = -1  # every map goes through numpy
    try:
        large = _fields(build())
    finally:
        tm_module._SMALL = saved
    return small, large


def _map(spec: list[tuple[int, int, int]], lb: int, extent: int) -> TypeMap:
    return TypeMap([d for d, _, _ in spec], [k for _, k, _ in spec], lb, lb + extent,
                   [c for _, _, c in spec])  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(runs, st.integers(-8, 8), st.integers(0, 48))
def test_merging_runs_is_the_same_on_both_paths(spec: list[tuple[int, int, int]], lb: int,
                                                 extent: int) -> None:  # fmt: skip
    small, large = _both(lambda: _map(spec, lb, extent))
    assert small == large


@settings(max_examples=200, deadline=None)
@given(runs, st.integers(0, 48), blocks)
def test_blocks_and_concat_are_the_same_on_both_paths(
    spec: list[tuple[int, int, int]], extent: int, pairs: list[tuple[int, int]]
) -> None:
    def build() -> TypeMap:
        m = _map(spec, 0, extent)
        made = m.blocks([n for n, _ in pairs], [d for _, d in pairs])
        return TypeMap.concat([made, m.replicate(np.array([d for _, d in pairs])), m])

    small, large = _both(build)
    assert small == large


@pytest.mark.parametrize("name", ["INT", "DOUBLE"])
def test_dense_blocks_stay_one_run_per_block_on_both_paths(name: str) -> None:
    base = predefined[name].typemap
    small, large = _both(lambda: base.blocks([2, 0, 3], [0, 100, 2 * base.extent]))
    assert small == large
    assert small[2] == [5]  # the two blocks touch: merged into one run of 5
