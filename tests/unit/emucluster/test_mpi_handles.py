"""Handles of issue 15 (topo): Info objects and Op handles without MPI init, and communicator
topologies, pickling and split types on a singleton rank (own interpreter each)."""

from __future__ import annotations

import pickle

import pytest

from emucluster.mpi.collective.ops import MAX_USER_OPS, Op
from emucluster.mpi.collective.ops import predefined_ops as ops
from emucluster.mpi.errors import ERR_INFO, ERR_INFO_KEY, ERR_INFO_NOKEY, ERR_OP
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info
from tests.unit.emucluster.test_mpi4py_surface import check


class MyInfo(Info):
    __slots__ = ()


def test_info_dictionary_and_errors() -> None:
    info = Info.Create({"a": "1"})
    info["b"] = "2"
    info.Set("c", "3")
    assert info.items() == [("a", "1"), ("b", "2"), ("c", "3")]
    assert (info.Get("zz"), info.Get_nkeys(), info.Get_nthkey(1)) == (None, 3, "b")
    with pytest.raises(MPIException) as err:
        info.Delete("zz")
    assert err.value.Get_error_class() == ERR_INFO_NOKEY
    with pytest.raises(MPIException) as err:
        info.Get_nthkey(3)
    assert err.value.Get_error_class() == ERR_INFO_KEY
    dup = info.Dup()
    assert dup != info
    assert dup.items() == info.items()
    info.Free()
    assert not info
    assert info == INFO_NULL
    for call in (INFO_NULL.Free, INFO_NULL.Dup, INFO_NULL.Get_nkeys):
        with pytest.raises(MPIException) as err:
            call()
        assert err.value.Get_error_class() == ERR_INFO


def test_info_subclass_keeps_type_through_dup_and_pickle() -> None:
    info = MyInfo.Create()
    info.update(zip("abc", "123", strict=True))
    assert type(info.Dup()) is MyInfo
    assert type(info.copy()) is MyInfo
    again = pickle.loads(pickle.dumps(info))
    assert type(again) is MyInfo
    assert again.items() == info.items()
    assert again != info
    assert pickle.loads(pickle.dumps(INFO_NULL)) is INFO_NULL


def test_op_handles_compare_by_operation() -> None:
    assert Op() == ops["OP_NULL"]
    assert Op() is not ops["OP_NULL"]
    assert not Op()
    assert Op(ops["MAX"]) == ops["MAX"]
    assert Op(ops["MAX"]) != ops["MIN"]
    assert pickle.loads(pickle.dumps(ops["SUM"])) is ops["SUM"]
    clone = pickle.loads(pickle.dumps(Op(ops["SUM"])))
    assert clone == ops["SUM"]
    assert clone is not ops["SUM"]
    with pytest.raises(ValueError, match="cannot call"):
        ops["OP_NULL"](None, None)


def _add(a: list[int], b: list[int], dt: object) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def test_user_ops_slots_free_and_pickle() -> None:
    made = [Op.Create(_add, commute=True) for _ in range(MAX_USER_OPS)]
    try:
        with pytest.raises(RuntimeError):
            Op.Create(_add)
        with pytest.raises(RuntimeError):  # a pickled user op is re-created: needs a slot
            pickle.loads(pickle.dumps(made[0]))
    finally:
        for op in made:
            op.Free()
    op = Op.Create(_add, commute=False)
    twin = pickle.loads(pickle.dumps(op))
    assert twin != op
    assert twin([2], [3]) == [5]
    assert not twin.Is_commutative()
    op.Free()
    twin.Free()
    assert not op
    with pytest.raises(MPIException) as err:
        op.Free()
    assert err.value.Get_error_class() == ERR_OP


def test_self_topologies_pickling_and_split_types() -> None:
    check(
        """
        import pickle
        from emucluster import MPI
        c = MPI.COMM_SELF
        cart = c.Create_cart([1], periods=[True])
        assert type(cart) is MPI.Cartcomm and cart.topology == MPI.CART and cart.is_topo
        assert cart.Shift(0, 1) == (0, 0) and cart.neighbor_allgather(7) == [7, 7]
        assert MPI.Comm.fromint(cart.toint()) == cart
        assert type(MPI.Comm.fromint(cart.toint())) is MPI.Cartcomm
        dup = cart.Dup()
        assert type(dup) is MPI.Cartcomm and dup.dims == [1]
        assert MPI.Comm.Compare(cart, dup) == MPI.CONGRUENT
        for bad in (lambda: MPI.Graphcomm(cart), lambda: MPI.Topocomm(c), lambda: MPI.Intercomm(c)):
            try:
                bad()
            except TypeError:
                pass
            else:
                raise AssertionError("expected TypeError")
        try:
            pickle.dumps(dup)
        except ValueError:
            pass
        else:
            raise AssertionError("a derived communicator pickled")
        assert pickle.loads(pickle.dumps(MPI.COMM_WORLD)) is MPI.COMM_WORLD
        assert pickle.loads(pickle.dumps(MPI.Intracomm(c))) == c
        g = c.Create_dist_graph_adjacent([0], [0], [5], [6])
        assert g.Get_dist_neighbors() == ([0], [0], ([5], [6]))
        assert g.neighbor_alltoall(["x"]) == ["x"]
        assert c.Split_type(MPI.COMM_TYPE_HW_UNGUIDED) == MPI.COMM_NULL
        info = MPI.Info.Create()
        info.Set("mpi_hw_resource_type", "mpi_shared_memory")
        assert c.Split_type(MPI.COMM_TYPE_HW_GUIDED, info=info).size == 1
        assert c.Split_type(MPI.COMM_TYPE_HW_GUIDED) == MPI.COMM_NULL
        assert MPI.COMM_NULL.Get_name() == "MPI_COMM_NULL"
        assert MPI.Comm.Get_parent() == MPI.COMM_NULL
        assert MPI.COMM_WORLD.Get_attr(MPI.APPNUM) == 0
        k = MPI.Comm.Create_keyval(copy_fn=True)
        c2 = c.Dup(); c2.Set_attr(k, "v"); c3 = c2.Dup()
        assert c3.Get_attr(k) == "v"
        c2.Free(); c3.Free(); dup.Free(); cart.Free(); g.Free()
        calls = []
        eh = MPI.Comm.Create_errhandler(lambda comm, code: calls.append(code))
        c4 = c.Dup(); c4.Set_errhandler(eh); c4.Call_errhandler(MPI.ERR_OTHER)
        assert calls == [MPI.ERR_OTHER] and c4.Get_errhandler() == eh
        c4.Set_errhandler(MPI.ERRORS_RETURN); c4.Call_errhandler(MPI.ERR_OTHER)
        assert calls == [MPI.ERR_OTHER]
        eh.Free(); c4.Free()
        s = MPI.Session.Init()
        assert [s.Get_nth_pset(i) for i in range(s.Get_num_psets())] == ["mpi://WORLD", "mpi://SELF"]
        assert s.Get_pset_info("mpi://SELF").Get("mpi_size") == "1"
        comm = MPI.Intracomm.Create_from_group(s.Create_group("mpi://SELF"))
        assert comm.size == 1 and MPI.Comm.Compare(comm, c) == MPI.CONGRUENT
        comm.Free(); s.Finalize()
        try:
            MPI.SESSION_NULL.Get_num_psets()
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.ERR_SESSION
        else:
            raise AssertionError("SESSION_NULL answered")
        """
    )


def test_errhandler_handles_slots_and_pickle() -> None:
    from emucluster.mpi.errhandler import (
        ERRHANDLER_NULL,
        ERRORS_ARE_FATAL,
        ERRORS_RETURN,
        MAX_USER_ERRHANDLERS,
        Errhandler,
        call,
    )

    assert Errhandler(ERRORS_RETURN) == ERRORS_RETURN
    assert pickle.loads(pickle.dumps(ERRORS_RETURN)) is ERRORS_RETURN
    seen: list[tuple[object, int]] = []
    made = [
        Errhandler._create(lambda obj, code: seen.append((obj, code)))
        for _ in range(MAX_USER_ERRHANDLERS)
    ]
    with pytest.raises(RuntimeError):
        Errhandler._create(lambda obj, code: None)
    with pytest.raises(ValueError, match="cannot pickle"):
        pickle.dumps(made[0])
    aborted: list[int] = []
    call(made[3]._handler(), "comm", 15, aborted.append)
    assert seen == [("comm", 15)]
    call(ERRORS_ARE_FATAL._handler(), "comm", 15, aborted.append)  # the fatal one aborts
    call(ERRORS_RETURN._handler(), "comm", 15, aborted.append)
    assert aborted == [15]
    extra = Errhandler(made[0])  # a second handle to a handler
    for handle in made:
        handle.Free()
    assert made[0] == ERRHANDLER_NULL
    Errhandler._create(lambda obj, code: None).Free()  # slots came back
    extra.Free()


def test_empty_message_is_none_lock_table_and_null_type_free() -> None:
    """mpi4py semantics found by its test_p2p_obj and test_exceptions: a zero-byte buffer
    send received by ``recv`` is None; lowercase collectives take a per-communicator lock
    (``MPI._comm_lock_table``); freeing DATATYPE_NULL is ERR_TYPE."""
    check(
        """
        import threading
        from emucluster import MPI
        c = MPI.COMM_SELF.Dup()
        req = c.Isend([None, 0, "B"], 0)
        assert c.recv(None, 0) is None
        req.Wait()
        table = MPI._comm_lock_table(c)
        assert "bcast" not in table
        assert c.bcast(5, root=0) == 5
        assert isinstance(table["bcast"], type(threading.Lock()))
        c.Free()
        try:
            MPI.DATATYPE_NULL.Free()
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.ERR_TYPE
        else:
            raise AssertionError("DATATYPE_NULL.Free did not raise")
        """
    )


def test_every_handle_class_round_trips_through_its_integer() -> None:
    from emucluster.mpi.comm.group import GROUP_EMPTY, GROUP_NULL, Group
    from emucluster.mpi.datatype.handles import DATATYPE_NULL, INT
    from emucluster.mpi.errhandler import ERRHANDLER_NULL, ERRORS_RETURN, Errhandler
    from emucluster.mpi.io.file import FILE_NULL, File
    from emucluster.mpi.pt2pt.mprobe import MESSAGE_NO_PROC, MESSAGE_NULL, Message

    info = Info.Create({"k": "v"})
    dup = INT.Dup()
    objects = [DATATYPE_NULL, INT, dup, ops["SUM"], ERRHANDLER_NULL, ERRORS_RETURN, INFO_NULL,
               info, GROUP_NULL, GROUP_EMPTY, Group._of((0, 1)), MESSAGE_NULL, MESSAGE_NO_PROC,
               FILE_NULL]  # fmt: skip
    for obj in objects:
        cls = type(obj)
        for to, back in (("tohandle", "fromhandle"), ("toint", "fromint"), ("py2f", "f2py")):
            number = getattr(obj, to)()
            assert number == obj.handle
            assert number != -1
            assert getattr(cls, back)(number) == obj, (obj, to)
    assert Errhandler.fromhandle(0) == ERRHANDLER_NULL
    assert Group.fromhandle(0) == GROUP_NULL
    assert Message.fromhandle(0) == MESSAGE_NULL
    assert File.fromhandle(0) == FILE_NULL
    assert INFO_NULL.handle == 0
    assert info.handle != 0
    with pytest.raises(TypeError):
        Group.fromhandle(info.handle)  # a handle names one class of object
    with pytest.raises(ValueError, match="no live object"):
        Info.fromhandle(10**9)  # no such handle
    dup.Free()
    info.Free()


def test_abi_queries_report_no_standard_abi_and_the_integer_sizes() -> None:
    from emucluster.mpi import environment

    assert environment.Get_abi_version() == (-1, -1)  # no C ABI: what a non-ABI MPI answers
    info = environment.Get_abi_info()
    assert {info.Get(f"mpi_{t}_size") for t in ("aint", "count", "offset")} == {"8"}
    info.Free()
    assert environment.Get_abi_fortran_info() == INFO_NULL


def test_version_is_mpi_4_0_everywhere_it_is_reported() -> None:
    from emucluster.mpi import environment

    assert environment.Get_version() == (environment.VERSION, environment.SUBVERSION) == (4, 0)
    assert "MPI 4.0" in environment.Get_library_version()


def test_status_fortran_form_is_mpich_layout() -> None:
    from emucluster.mpi.request.status import F_ERROR, F_SOURCE, F_STATUS_SIZE, F_TAG, Status

    status = Status()
    status.source, status.tag, status.error = 3, 17, ERR_OP
    status._bytes, status._cancelled = (5 << 32) + 9, True
    form = status.py2f()
    assert len(form) == F_STATUS_SIZE
    assert (form[F_SOURCE], form[F_TAG], form[F_ERROR]) == (3, 17, ERR_OP)
    back = Status.f2py(form)
    assert (back.source, back.tag, back.error) == (3, 17, ERR_OP)
    assert back._bytes == (5 << 32) + 9
    assert back.Is_cancelled()
    assert pickle.loads(pickle.dumps(status)).py2f() == form


def _mysum(a: object, b: object, datatype: object) -> object:
    return a + b  # type: ignore[operator]


def test_a_user_op_from_its_integer_handle_is_the_same_op_but_does_not_pickle() -> None:
    """As mpi4py's test_op: ``Op.fromint(op.toint())`` has lost the Python function."""
    op = Op.Create(_mysum, commute=True)
    clone = Op.fromint(op.toint())
    assert clone == op
    assert clone is not op
    loaded = pickle.loads(pickle.dumps(op))  # the original pickles (as a new Create)
    assert loaded != op
    loaded.Free()
    with pytest.raises(ValueError, match="cannot pickle"):
        pickle.dumps(clone)
    op.Free()
    assert Op.fromint(ops["SUM"].toint()) is ops["SUM"]
