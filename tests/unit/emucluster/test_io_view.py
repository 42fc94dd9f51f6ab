"""File views (emucluster/mpi/io/view.py): the stream-to-file mapping against a brute-force
model built byte by byte from the file type's type map."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.errors import ERR_ARG, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.io.view import FileView

INT, BYTE, DOUBLE = predefined["INT"], predefined["BYTE"], predefined["DOUBLE"]


def _model(view_disp: int, filetype: Datatype, tiles: int) -> list[int]:
    """The file position of every visible byte of the first ``tiles`` tiles."""
    typemap = filetype.typemap
    extent = filetype.Get_extent()[1]
    positions: list[int] = []
    for tile in range(tiles):
        for disp, nbytes in zip(typemap.disps.tolist(), typemap.run_bytes().tolist(), strict=True):
            base = view_disp + tile * extent + disp
            positions.extend(range(base, base + nbytes))
    return positions


def _expand(extents: list[tuple[int, int]]) -> list[int]:
    return [at + i for at, length in extents for i in range(length)]


filetypes = st.one_of(
    st.builds(
        lambda n, b, s: INT.Create_vector(n, b, b + s),
        st.integers(1, 4),
        st.integers(1, 3),
        st.integers(0, 3),
    ),
    st.builds(
        lambda blocks, gaps: INT.Create_indexed(
            blocks, [sum(blocks[:i]) + sum(gaps[: i + 1]) for i in range(len(blocks))]
        ),
        st.lists(st.integers(1, 3), min_size=1, max_size=4),
        st.lists(st.integers(0, 3), min_size=4, max_size=4),
    ),
    st.builds(
        lambda n, lb, extra: INT.Create_contiguous(n).Create_resized(lb, 4 * n + extra),
        st.integers(1, 3),
        st.integers(0, 8),
        st.integers(0, 12),
    ),
    st.just(INT),
)


@settings(max_examples=300, deadline=None)
@given(
    filetype=filetypes, disp=st.integers(0, 50), start=st.integers(0, 40), count=st.integers(0, 40)
)
def test_extents_match_the_byte_by_byte_model(
    filetype: Datatype, disp: int, start: int, count: int
) -> None:
    view = FileView(disp, INT, filetype, "native")
    model = _model(disp, filetype, tiles=(4 * (start + count)) // filetype.Get_size() + 2)
    got = view.extents(4 * start, 4 * count)
    assert _expand(got) == model[4 * start : 4 * (start + count)]
    assert all(a + n < b for (a, n), (b, _) in itertools.pairwise(got))  # merged
    assert view.byte_offset(start) == model[4 * start]
    position = model[4 * start]
    assert view.visible_before(position) == 4 * start


def test_a_plain_view_is_the_file_from_its_displacement() -> None:
    view = FileView(10, DOUBLE, DOUBLE, "native")
    assert view.contiguous
    assert view.extents(16, 100) == [(26, 100)]
    assert view.byte_offset(3) == 34
    assert view.visible_before(5) == 0
    assert view.visible_before(42) == 32


def test_a_vector_view_skips_the_holes() -> None:
    view = FileView(0, INT, INT.Create_vector(2, 1, 3), "native")  # ints 0 and 3 of each 4
    assert view.extents(0, 16) == [(0, 4), (12, 8), (28, 4)]  # tile extent 16 (resized: 4 ints)


def test_a_file_type_not_made_of_etypes_is_refused() -> None:
    with pytest.raises(MPIException) as err:
        FileView(0, DOUBLE, INT.Create_contiguous(3), "native")
    assert err.value.Get_error_class() == ERR_TYPE
    with pytest.raises(MPIException) as err:
        FileView(-1, BYTE, BYTE, "native")
    assert err.value.Get_error_class() == ERR_ARG
