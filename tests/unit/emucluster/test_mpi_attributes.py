"""Attribute caching on communicators and datatypes: keyval spaces, copy and delete callbacks,
freed keyvals still in use, and callback errors (emucluster.mpi.keyvals)."""

from __future__ import annotations

from typing import Any

import pytest

from emucluster import MPI
from emucluster.mpi.keyvals import Keyvals


def test_datatype_attribute_set_get_delete_and_dup_copies_by_callback() -> None:
    copied: list[Any] = []
    deleted: list[Any] = []
    dt = MPI.INT.Dup()
    kv = MPI.Datatype.Create_keyval(
        copy_fn=lambda o, k, v: copied.append(v) or ("copy", v),
        delete_fn=lambda o, k, v: deleted.append(v),
    )
    assert dt.Get_attr(kv) is None
    dt.Set_attr(kv, 7)
    assert dt.Get_attr(kv) == 7
    assert MPI.Datatype(dt).Get_attr(kv) == 7  # another handle of the same type
    dup = dt.Dup()
    assert dup != dt
    assert dup.Get_attr(kv) == ("copy", 7)
    assert copied == [7]
    dt.Set_attr(kv, 8)  # replacing deletes the old value
    assert deleted == [7]
    dt.Free()  # freeing deletes what is attached
    assert deleted == [7, 8]
    dup.Delete_attr(kv)
    assert deleted == [7, 8, ("copy", 7)]
    assert MPI.Datatype.Free_keyval(kv) == MPI.KEYVAL_INVALID
    dup.Free()


def test_copy_false_or_none_does_not_copy_and_true_copies_as_is() -> None:
    value = [1]
    for copy_fn, expect in ((None, None), (False, None), (True, value)):
        kv = MPI.Datatype.Create_keyval(copy_fn)
        dt = MPI.BYTE.Dup()
        dt.Set_attr(kv, value)
        dup = dt.Dup()
        assert dup.Get_attr(kv) is expect
        for t in (dt, dup):
            t.Free()
        MPI.Datatype.Free_keyval(kv)


def test_keyval_spaces_of_comm_and_datatype_are_apart() -> None:
    kv = MPI.Datatype.Create_keyval()
    try:
        with pytest.raises(MPI.Exception) as err:
            MPI.COMM_SELF.Set_attr(kv + 1000, 1)
        assert err.value.Get_error_class() == MPI.ERR_KEYVAL
        with pytest.raises(MPI.Exception) as err:
            MPI.INT.Get_attr(MPI.KEYVAL_INVALID)
        assert err.value.Get_error_class() == MPI.ERR_KEYVAL
    finally:
        MPI.Datatype.Free_keyval(kv)


def test_freed_keyval_refuses_new_use_but_its_delete_callback_still_runs() -> None:
    deleted: list[Any] = []
    dt = MPI.DOUBLE.Dup()
    kv = MPI.Datatype.Create_keyval(None, lambda o, k, v: deleted.append(v))
    dt.Set_attr(kv, "x")
    MPI.Datatype.Free_keyval(kv)
    with pytest.raises(MPI.Exception):
        dt.Set_attr(kv, "y")
    with pytest.raises(MPI.Exception):
        MPI.Datatype.Free_keyval(kv)
    dt.Free()
    assert deleted == ["x"]


def test_callback_error_becomes_err_other_and_is_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def boom(o: object, k: int, v: object) -> None:
        raise ValueError("boom")

    registry = Keyvals("Thing", first=64)
    kv = registry.create(boom, boom)
    attrs: dict[int, Any] = {kv: 1}
    with pytest.raises(MPI.Exception) as err:
        registry.copied(object(), attrs)
    assert err.value.Get_error_class() == MPI.ERR_OTHER
    with pytest.raises(MPI.Exception):
        registry.delete(object(), attrs, kv)
    assert "ValueError: boom" in capsys.readouterr().err
    assert attrs == {}


def test_comm_attributes_still_follow_their_callbacks() -> None:
    kv = MPI.Comm.Create_keyval(copy_fn=True)
    try:
        MPI.COMM_SELF.Set_attr(kv, "v")
        dup = MPI.COMM_SELF.Dup()
        assert dup.Get_attr(kv) == "v"
        dup.Free()
        MPI.COMM_SELF.Delete_attr(kv)
        assert MPI.COMM_SELF.Get_attr(kv) is None
    finally:
        MPI.Comm.Free_keyval(kv)
