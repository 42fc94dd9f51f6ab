"""Lazy type maps: a constructor's bounds, sizes and kind, computed without the runs, equal
what the runs give, and the runs equal the expanded type map (one entry per basic element).

`TypeMap`'s constructors (``blocks``, ``block``, ``strided``, ``replicate``, ``resized``,
``concat``, a subarray's selection) return maps whose runs are made when first read; their
bounds are arithmetic over blocks. The reference here is the plain definition: a type map as
the list of (displacement, kind) of every basic element, in type-map order, built element by
element, with its bounds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.mpi.datatype import constructors as c
from emucluster.mpi.datatype.datatype import predefined
from emucluster.mpi.datatype.typemap import BASIC_SIZES, TypeMap

KINDS = [int(predefined[n].typemap.kinds[0]) for n in ("BYTE", "SHORT", "INT", "DOUBLE")]


@dataclass
class Ref:
    """A type map expanded: every basic element's (displacement, kind), and the bounds."""

    elements: list[tuple[int, int]]
    lb: int
    ub: int

    @property
    def extent(self) -> int:
        return self.ub - self.lb

    def summary(self) -> tuple[object, ...]:
        sizes = [BASIC_SIZES[k] for _, k in self.elements]
        kinds = {k for _, k in self.elements}
        true_lb = min((d for d, _ in self.elements), default=0)
        true_ub = max((d + s for (d, _), s in zip(self.elements, sizes, strict=True)), default=0)
        kind = kinds.pop() if len(kinds) == 1 else None
        return (self.lb, self.ub, sum(sizes), len(self.elements), true_lb, true_ub, kind)

    def copies(self, offsets: list[int]) -> Ref:
        if not offsets:
            return Ref([], 0, 0)
        out = [(o + d, k) for o in offsets for d, k in self.elements]
        return Ref(out, min(offsets) + self.lb, max(offsets) + self.ub)

    def blocks(self, lengths: list[int], starts: list[int]) -> Ref:
        return self.copies([s + j * self.extent for s, n in zip(starts, lengths, strict=True)
                            for j in range(n)])  # fmt: skip


def concat(parts: list[Ref]) -> Ref:
    parts = [p for p in parts if p.elements]
    if not parts:
        return Ref([], 0, 0)
    return Ref([e for p in parts for e in p.elements], min(p.lb for p in parts),
               max(p.ub for p in parts))  # fmt: skip


def summary(m: TypeMap) -> tuple[object, ...]:
    return (m.lb, m.ub, m.size, m.elements, m.true_lb, m.true_ub, m.homogeneous())


def expanded(m: TypeMap) -> list[tuple[int, int]]:
    """The runs of ``m`` (made now if lazy) as one entry per basic element."""
    out = []
    for d, k, n in zip(m.disps.tolist(), m.kinds.tolist(), m.counts.tolist(), strict=True):
        out += [(d + j * BASIC_SIZES[k], k) for j in range(n)]
    return out


def agree(m: TypeMap, ref: Ref) -> None:
    """The lazy map's bounds (read before its runs) and its runs match the reference."""
    assert summary(m) == ref.summary()
    assert expanded(m) == ref.elements
    assert m.built
    assert summary(m) == ref.summary()


small = st.integers(-3, 4)
lengths = st.integers(0, 3)
offsets = st.integers(-40, 40)


@st.composite
def base(draw: st.DrawFn) -> tuple[TypeMap, Ref]:
    """A basic type, or an eager map of a few runs with any bounds."""
    if draw(st.booleans()):
        kind = draw(st.sampled_from(KINDS))
        return TypeMap.basic(kind), Ref([(0, kind)], 0, BASIC_SIZES[kind])
    runs = draw(st.lists(st.tuples(offsets, st.sampled_from(KINDS), lengths), max_size=4))
    lb, extent = draw(offsets), draw(st.integers(-8, 48))
    m = TypeMap([d for d, _, _ in runs], [k for _, k, _ in runs], lb, lb + extent,
                [n for _, _, n in runs])  # fmt: skip
    ref = Ref([(d + j * BASIC_SIZES[k], k) for d, k, n in runs for j in range(n)], lb, lb + extent)
    return m, ref


@st.composite
def derived(draw: st.DrawFn, depth: int = 2) -> tuple[TypeMap, Ref]:
    """A map made by one to ``depth`` constructor steps over `base` maps."""
    m, ref = draw(base())
    for _ in range(draw(st.integers(1, depth))):
        step = draw(st.sampled_from(["blocks", "block", "strided", "replicate", "resized",
                                     "concat"]))  # fmt: skip
        if step == "blocks":
            pairs = draw(st.lists(st.tuples(lengths, offsets), max_size=4))
            ls, ss = [n for n, _ in pairs], [s for _, s in pairs]
            m, ref = m.blocks(ls, ss), ref.blocks(ls, ss)
        elif step == "block":
            n, s = draw(lengths), draw(offsets)
            m, ref = m.block(n, s), ref.blocks([n], [s])
        elif step == "strided":
            count, bl, stride = draw(lengths), draw(lengths), draw(offsets)
            m = m.strided(count, bl, stride)
            ref = ref.blocks([bl] * count, [i * stride for i in range(count)])
        elif step == "replicate":
            offs = draw(st.lists(offsets, max_size=4))
            as_array = draw(st.booleans())
            m, ref = m.replicate(np.array(offs, np.int64) if as_array else offs), ref.copies(offs)
        elif step == "resized":
            lb, extent = draw(offsets), draw(st.integers(-8, 48))
            m, ref = m.resized(lb, extent), Ref(ref.elements, lb, lb + extent)
        else:
            other, other_ref = draw(base())
            m, ref = TypeMap.concat([m, other]), concat([ref, other_ref])
    return m, ref


@settings(max_examples=300, deadline=None)
@given(derived())
def test_lazy_bounds_and_runs_equal_the_expanded_map(made: tuple[TypeMap, Ref]) -> None:
    agree(*made)


@settings(max_examples=200, deadline=None)
@given(derived(depth=1), derived(depth=1), lengths, offsets, lengths, offsets,
       st.sampled_from([1, 2, 4, 8, 16]))  # fmt: skip
def test_struct_of_lazy_maps_equals_the_expanded_struct(
    a: tuple[TypeMap, Ref],
    b: tuple[TypeMap, Ref],
    n1: int,
    d1: int,
    n2: int,
    d2: int,
    align: int,
) -> None:
    """A struct of two derived members (a lazy map over lazy maps), its extent rounded up to
    ``align`` when it has data (a C struct's padding)."""
    (ma, ra), (mb, rb) = a, b
    made = c.struct([n1, n2], [d1, d2], [ma, mb], [align, 1]).typemap
    ref = concat([ra.blocks([n1], [d1]), rb.blocks([n2], [d2])])
    pad = -ref.extent % align
    agree(made, Ref(ref.elements, ref.lb, ref.ub + pad))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 4), st.integers(0, 4)), max_size=3),
       st.sampled_from([c.ORDER_C, c.ORDER_F]),
       st.sampled_from(["INT", "DOUBLE", "vec"]))  # fmt: skip
def test_subarray_bounds_and_runs_equal_the_expanded_selection(
    dims: list[tuple[int, int, int]], order: int, old: str
) -> None:
    """Subarrays of a basic type and of a strided type with a negative extent."""
    sizes = [s for s, _, _ in dims]
    subs = [min(b, s) for s, b, _ in dims]
    starts = [min(f, s - b) for (s, _, f), b in zip(dims, subs, strict=True)]
    if old == "vec":
        m = predefined["SHORT"].typemap.strided(2, 1, -6)
        oref = Ref([(0, KINDS[1]), (-6, KINDS[1])], -6, 2)
    else:
        m = predefined[old].typemap
        oref = Ref([(0, int(m.kinds[0]))], 0, m.extent)
    made = c.subarray(m, sizes, subs, starts, order).typemap
    ranges = [range(f, f + b) for f, b in zip(starts, subs, strict=True)]
    strides, step = [], 1
    for size in reversed(sizes) if order == c.ORDER_C else sizes:
        strides.append(step)
        step *= size
    if order == c.ORDER_C:
        strides.reverse()
    flat = sorted(sum(i * s for i, s in zip(idx, strides, strict=True))
                  for idx in itertools.product(*ranges))  # fmt: skip
    ref = oref.copies([f * oref.extent for f in flat])
    total = int(np.prod(sizes)) * oref.extent
    agree(made, Ref(ref.elements, oref.lb, oref.lb + total))


def test_a_huge_vector_is_made_without_its_blocks() -> None:
    """2^31 blocks of 2^31 elements: bounds at once, no list of blocks (the runs would be)."""
    big = 2**31
    v = c.vector(predefined["DOUBLE"].typemap, big, big, 2 * big).typemap
    assert not v.built
    assert (v.lb, v.size, v.elements) == (0, big * big * 8, big * big)
    assert v.ub == ((big - 1) * 2 * big + big) * 8
    assert (v.true_lb, v.true_ub) == (0, v.ub)
    assert v.homogeneous() == int(predefined["DOUBLE"].typemap.kinds[0])
