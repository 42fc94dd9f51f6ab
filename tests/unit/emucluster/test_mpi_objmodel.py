"""mpi4py's object model as its test_objmodel/test_handle check it: weak references to every
handle, ``_sizeof``/``_addressof``/``_handleof``, safe ``free`` of null requests, and windows
as handles (``handle``/``fromhandle``, their own error handlers, WIN_NULL pickling to itself)."""

from __future__ import annotations

import copy
import ctypes
import pickle
import weakref
from typing import Any

import pytest

from emucluster import MPI
from emucluster.mpi.objmodel import addressof, handleof, sizeof

NULLS = [MPI.Status(), MPI.DATATYPE_NULL, MPI.REQUEST_NULL, MPI.INFO_NULL, MPI.ERRHANDLER_NULL,
         MPI.SESSION_NULL, MPI.GROUP_NULL, MPI.WIN_NULL, MPI.OP_NULL, MPI.FILE_NULL,
         MPI.MESSAGE_NULL, MPI.COMM_NULL]  # fmt: skip


@pytest.mark.parametrize("obj", NULLS, ids=lambda o: type(o).__name__)
def test_every_object_can_be_weakly_referenced(obj: object) -> None:
    ref = weakref.ref(obj)
    assert ref() is obj


@pytest.mark.parametrize("obj", [*NULLS, MPI.COMM_WORLD, MPI.INT], ids=lambda o: type(o).__name__)
def test_the_handle_cell_holds_the_handle(obj: object) -> None:
    assert sizeof(obj) == sizeof(type(obj)) == 8
    address = addressof(obj)
    assert address != 0
    assert ctypes.c_uint64.from_address(address).value == handleof(obj) >= 0


def test_non_mpi_objects_are_refused() -> None:
    assert getattr(MPI, "_sizeof") is sizeof  # noqa: B009  (a private name of the facade)
    for query in (sizeof, addressof, handleof):
        with pytest.raises(TypeError):
            query(None)


def test_free_of_a_null_request_does_nothing() -> None:
    request = MPI.Request(MPI.REQUEST_NULL)
    request.free()
    assert not request
    with pytest.raises(MPI.Exception):
        request.Free()


def test_win_null_is_a_handle_with_error_handlers_of_its_class() -> None:
    assert MPI.Win.fromhandle(MPI.WIN_NULL.handle) == MPI.WIN_NULL
    assert MPI.Win(MPI.WIN_NULL) == MPI.WIN_NULL
    assert MPI.Win.fromhandle(0) == MPI.WIN_NULL
    handler = MPI.Win.Create_errhandler(lambda w, code: None)
    assert isinstance(handler, MPI.Errhandler)
    handler.Free()
    assert pickle.loads(pickle.dumps(MPI.WIN_NULL)) is MPI.WIN_NULL
    copy = pickle.loads(pickle.dumps(MPI.Win(MPI.WIN_NULL)))
    assert copy == MPI.WIN_NULL
    assert copy is not MPI.WIN_NULL


CONSTANTS = [MPI.INT, MPI.INFO_ENV, MPI.SUM, MPI.GROUP_EMPTY, MPI.ERRORS_RETURN,
             MPI.MESSAGE_NO_PROC, MPI.COMM_SELF, MPI.COMM_WORLD]  # fmt: skip


@pytest.mark.parametrize("obj", NULLS[1:], ids=lambda o: type(o).__name__)
def test_free_of_a_null_handle_does_nothing(obj: Any) -> None:
    obj.free()
    obj.free()
    assert not obj


@pytest.mark.parametrize("obj", CONSTANTS, ids=lambda o: type(o).__name__)
def test_free_leaves_constants_and_nulls_their_other_handles(obj: Any) -> None:
    obj.free()
    assert obj
    if not isinstance(obj, MPI.Errhandler):
        other = type(obj)(obj)
        other.free()
        assert not other
        other.free()
    if hasattr(obj, "Dup"):
        dup = obj.Dup()
        dup.free()
        assert not dup
    assert obj


def test_free_frees_created_objects() -> None:
    created: list[Any] = [MPI.Op.Create(lambda *_: None), MPI.COMM_SELF.Get_group(),
                          MPI.Info.Create(), MPI.COMM_SELF.Dup()]  # fmt: skip
    for obj in created:
        obj.free()
        assert not obj


def test_the_placeholder_buffers_have_the_types_mpi4py_typing_names() -> None:
    assert isinstance(MPI.BOTTOM, MPI.BottomType)
    assert isinstance(MPI.IN_PLACE, MPI.InPlaceType)
    assert repr(MPI.BOTTOM) == "BOTTOM"


@pytest.mark.parametrize("obj", NULLS, ids=lambda o: type(o).__name__)
def test_a_handle_class_takes_only_its_own_handles(obj: Any) -> None:
    cls = type(obj)
    assert cls() == obj
    for other in [*(o for o in NULLS if type(o) is not cls), 1234, "abc"]:
        with pytest.raises(TypeError):
            cls(other)


class MyStatus(MPI.Status):
    """A subclass, importable from this module (pickling names it)."""


def test_a_copy_of_a_status_subclass_keeps_its_class() -> None:
    status = MyStatus()
    status.Set_source(3)
    dups: list[Any] = [copy.copy(status), copy.deepcopy(status)]
    dups.append(pickle.loads(pickle.dumps(status)))
    for dup in dups:
        assert type(dup) is MyStatus
        assert dup.Get_source() == 3


@pytest.mark.parametrize("obj", NULLS[1:], ids=lambda o: type(o).__name__)
def test_copies_of_a_constant_are_it_and_of_other_handles_keep_their_class(obj: Any) -> None:
    subclass = type(f"My{type(obj).__name__}", (type(obj),), {})
    for copier in (copy.copy, copy.deepcopy):
        assert copier(obj) is obj
        other = copier(type(obj)(obj))
        assert type(other) is type(obj)
        assert other is not obj
        assert other == obj
        mine = copier(subclass(obj))
        assert type(mine) is subclass
    assert pickle.loads(pickle.dumps(obj)) is obj


def test_a_request_converts_to_and_from_integers() -> None:
    request = MPI.COMM_SELF.Recv_init(bytearray(0), 0, 0)
    try:
        for to, back in ((request.toint, MPI.Request.fromint), (request.py2f, MPI.Request.f2py)):
            assert back(to()) == request
        assert MPI.Request.fromint(MPI.REQUEST_NULL.toint()) == MPI.REQUEST_NULL
    finally:
        request.Free()


@pytest.mark.parametrize("obj", [*NULLS, MPI.COMM_WORLD, MPI.INT, MPI.SUM, MPI.INFO_ENV],
                         ids=lambda o: type(o).__name__)  # fmt: skip
def test_handles_are_unhashable_as_mpi4pys(obj: object) -> None:
    with pytest.raises(TypeError):
        hash(obj)
    with pytest.raises(TypeError):
        {obj}  # noqa: B018


def test_the_facade_holds_no_module() -> None:
    """mpi4py's test_doc walks the module's names; a module among them (``os``, ...) leads it
    around import cycles without end."""
    assert not [name for name, value in vars(MPI).items() if isinstance(value, type(MPI))]
