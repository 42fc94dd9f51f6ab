"""The mpi4py surface of issue 15 on a singleton rank (no NIC): each case runs in its own
interpreter, since importing emucluster.MPI initialises the library for the process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from emucluster import mpi4py_shim
from launcher.cli import plan_from_argv


def run_singleton(code: str, *, shim: bool = False) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": mpi4py_shim.SHIM_PATH if shim else ""}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip


def check(code: str, *, shim: bool = False) -> None:
    result = run_singleton(textwrap.dedent(code) + "\nprint('OK')", shim=shim)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("OK"), result.stdout


def test_shim_makes_mpi4py_MPI_emucluster_MPI() -> None:
    check(
        """
        import mpi4py, emucluster.MPI
        from mpi4py import MPI
        assert MPI is emucluster.MPI and mpi4py.MPI is MPI
        assert MPI.get_vendor() == ("emucluster", (0, 1, 0))
        assert mpi4py.__version__ == "4.1.2" and mpi4py.rc.initialize
        """,
        shim=True,
    )


def test_emurun_flag_and_switch_put_the_shim_first() -> None:
    prog = sys.executable
    for argv, env in ((["-np", "2", "--mpi4py", prog], {}),
                      (["-np", "2", prog], {"EMUCLUSTER_MPI4PY": "1"})):  # fmt: skip
        plan = plan_from_argv(argv, {"PYTHONPATH": "/a", **env})
        assert plan.env["EMUCLUSTER_MPI4PY"] == "1"
        assert plan.env["PYTHONPATH"].split(":") == [mpi4py_shim.SHIM_PATH, "/a"]
    assert "PYTHONPATH" not in plan_from_argv(["-np", "2", prog], {}).env


def test_persistent_requests_restart_and_stay_alive() -> None:
    check("""
        from emucluster import MPI
        comm = MPI.COMM_SELF
        sbuf, rbuf = bytearray(4), bytearray(4)
        s, r = comm.Send_init(sbuf, 0, 1), comm.Recv_init(rbuf, 0, 1)
        for i in range(3):
            sbuf[:] = bytes([i]) * 4
            MPI.Prequest.Startall([s, r])
            assert MPI.Prequest.Waitany([s, r]) in (0, 1)
            assert MPI.Prequest.Waitany([s, r]) in (0, 1)
            assert MPI.Prequest.Waitany([s, r]) == MPI.UNDEFINED  # both inactive now
            assert rbuf == bytes([i]) * 4 and s and r
        s.Start()
        try:
            s.Start()
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.ERR_REQUEST
        else:
            raise SystemExit("a second Start of an active request must fail")
        s.Wait()
        s.Free(); r.Free()
        assert s == MPI.REQUEST_NULL
        """)


def test_matched_probe_claims_the_message() -> None:
    check("""
        from emucluster import MPI
        comm = MPI.COMM_SELF
        assert comm.Improbe() is None
        comm.send("first", 0, 1)
        comm.Send(b"second", 0, 2)
        st = MPI.Status()
        m = comm.Mprobe(0, MPI.ANY_TAG, st)
        assert st.tag == 1 and m
        assert comm.Iprobe(0, 1) is False  # claimed: no longer visible to probes
        assert m.recv() == "first" and not m
        buf = bytearray(3)
        m = comm.Mprobe(0, 2)
        try:
            m.Recv(buf)
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.ERR_TRUNCATE
        else:
            raise SystemExit("truncation not reported")
        assert MPI.MESSAGE_NO_PROC and comm.Mprobe(MPI.PROC_NULL) == MPI.MESSAGE_NO_PROC
        """)


def test_bsend_needs_an_attached_buffer_and_detach_returns_it() -> None:
    check("""
        from emucluster import MPI
        comm = MPI.COMM_SELF
        try:
            comm.bsend("x", 0, 0)
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.ERR_BUFFER
        else:
            raise SystemExit("bsend without a buffer must fail")
        mem = MPI.Alloc_mem(100 + MPI.BSEND_OVERHEAD)
        MPI.Attach_buffer(mem)
        comm.Bsend(b"y" * 100, 0, 0)
        try:
            comm.Bsend(b"z" * 101, 0, 0)  # more than the attached buffer holds
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.ERR_BUFFER
        else:
            raise SystemExit("an over-full attached buffer must fail")
        got = bytearray(100)
        comm.Recv(got, 0, 0)
        assert got == b"y" * 100
        assert MPI.Detach_buffer() is mem
        """)


def test_cancelled_receive_completes_as_cancelled() -> None:
    check("""
        from emucluster import MPI
        req = MPI.COMM_SELF.Irecv(bytearray(4), 0, 5)
        req.Cancel()
        st = MPI.Status()
        assert MPI.Request.Get_status_all([req], [st]) and req  # complete, not freed
        req.Wait(st)
        assert st.Is_cancelled() and not req
        """)


def test_status_memory_copy_and_pickle() -> None:
    check("""
        import pickle
        from emucluster import MPI
        st = MPI.Status()
        st.source, st.tag, st.error = 11, 22, 33
        mem = st.tomemory()
        seq = list(mem)
        mem[seq.index(22)] = 222
        assert st.tag == 222
        copy = MPI.Status(st)
        copy.tag = 1
        assert st.tag == 222 and pickle.loads(pickle.dumps(st)).tag == 222
        try:
            MPI.Status(123)
        except TypeError:
            pass
        else:
            raise SystemExit("Status(123) must raise TypeError")
        """)


def test_memory_is_mpi4pys_alias_of_buffer() -> None:
    check("""
        from emucluster import MPI
        assert MPI.memory is MPI.buffer and "memory" in MPI.__all__
        assert bytes(MPI.memory.allocate(3)) == bytes(3)
        """)


def test_user_error_classes_and_exception_protocol() -> None:
    check("""
        from emucluster import MPI
        cls = MPI.Add_error_class()
        assert cls > MPI.ERR_LASTCODE and MPI.COMM_WORLD.Get_attr(MPI.LASTUSEDCODE) == cls
        code = MPI.Add_error_code(cls)
        MPI.Add_error_string(code, "mine")
        assert MPI.Get_error_class(code) == cls and MPI.Get_error_string(code) == "mine"
        exc = MPI.Exception(MPI.ERR_TAG)
        assert repr(exc) == "MPI.Exception(4)" and exc == MPI.ERR_TAG and exc > MPI.SUCCESS
        assert MPI.Exception(-5) == MPI.ERR_UNKNOWN and not MPI.Exception(MPI.SUCCESS)
        """)


def test_a_singleton_writes_and_reads_a_file_and_its_handles_behave() -> None:
    check("""
        import os, pickle, tempfile
        from emucluster import MPI
        path = os.path.join(tempfile.mkdtemp(), "f.bin")
        amode = MPI.MODE_CREATE | MPI.MODE_RDWR | MPI.MODE_DELETE_ON_CLOSE
        fh = MPI.File.Open(MPI.COMM_SELF, path, amode)
        assert fh and fh != MPI.FILE_NULL and MPI.File.fromint(fh.toint()) == fh
        assert fh.Get_errhandler() == MPI.ERRORS_RETURN
        class MyFile(MPI.File):
            pass
        mine = MyFile(fh)
        assert type(mine) is MyFile and mine == fh
        fh.Write(b"hello, file")
        fh.Seek(7)
        out = bytearray(4)
        status = MPI.Status()
        fh.Read(out, status)
        assert out == b"file" and status.Get_count() == 4 and fh.Get_position() == 11
        try:
            pickle.dumps(fh)
        except ValueError:
            pass
        else:
            raise SystemExit("an open file pickled")
        fh.Close()
        assert not fh and not os.path.exists(path)
        assert pickle.loads(pickle.dumps(MPI.FILE_NULL)) is MPI.FILE_NULL
        assert MPI.FILE_NULL != MPI.SESSION_NULL
        """)


def test_file_sync_flushes_what_this_process_changed_and_only_then() -> None:
    check("""
        import os, tempfile
        from emucluster import MPI
        calls = []
        real_flush, real_ftruncate = os.fdatasync, os.ftruncate
        os.fdatasync = lambda fd: (calls.append("flush"), real_flush(fd))[1]
        os.ftruncate = lambda fd, n: (calls.append(f"ftruncate {n}"), real_ftruncate(fd, n))[1]
        path = os.path.join(tempfile.mkdtemp(), "s.bin")
        amode = MPI.MODE_CREATE | MPI.MODE_RDWR | MPI.MODE_DELETE_ON_CLOSE
        fh = MPI.File.Open(MPI.COMM_SELF, path, amode)
        fh.Sync()  # nothing written yet
        fh.Set_size(0)  # the size it has: nothing to do
        assert calls == [], calls
        fh.Write_at(0, b"data")
        fh.Sync()
        fh.Sync()  # the Sync-Barrier-Sync of the consistency rules: one flush
        assert calls == ["flush"], calls
        fh.Set_size(2)
        fh.Sync()
        assert calls == ["flush", "ftruncate 2", "flush"], calls
        assert fh.Get_size() == 2
        fh.Close()
        """)


@pytest.mark.parametrize("call", ["MPI.Win.Allocate(8)"])
def test_unsupported_features_raise_not_implemented(call: str) -> None:
    check(f"""
        from emucluster import MPI
        try:
            {call}
        except NotImplementedError:
            pass
        else:
            raise SystemExit("no NotImplementedError")
        """)


@pytest.mark.parametrize(
    ("call", "error_class"),
    [
        ("MPI.REQUEST_NULL.Free()", "ERR_REQUEST"),
        ('MPI.COMM_SELF.Spawn("true")', "ERR_SPAWN"),  # a singleton: no launcher to ask
        ('MPI.Lookup_name("svc")', "ERR_NAME"),
        ('MPI.Close_port("emucluster-port:0:5")', "ERR_PORT"),
        ('MPI.COMM_SELF.Connect("nonsense")', "ERR_PORT"),
        ("MPI.REQUEST_NULL.Cancel()", "ERR_REQUEST"),
        ("MPI.ERRHANDLER_NULL.Free()", "ERR_ERRHANDLER"),
        ("MPI.COMM_WORLD.Set_errhandler(MPI.ERRHANDLER_NULL)", "ERR_ERRHANDLER"),
        ("MPI.COMM_WORLD.Get_attr(MPI.KEYVAL_INVALID)", "ERR_KEYVAL"),
        ("MPI.COMM_NULL.Get_errhandler()", "ERR_COMM"),
    ],
)
def test_misuse_of_null_handles_raises_the_right_class(call: str, error_class: str) -> None:
    check(f"""
        from emucluster import MPI
        try:
            {call}
        except MPI.Exception as exc:
            assert exc.Get_error_class() == MPI.{error_class}, exc
        else:
            raise SystemExit("no MPI.Exception")
        """)


def test_shim_rc_refuses_unknown_options_and_profile_finds_libraries() -> None:
    check(
        """
        import warnings
        import mpi4py
        import mpi4py.rc
        assert mpi4py.rc is __import__("sys").modules["mpi4py.rc"]
        rc = type(mpi4py.rc)(threads=False)
        assert rc.threads is False and mpi4py.rc.threads is True
        for bad in (lambda: mpi4py.rc(ABCXYZ=1), lambda: setattr(mpi4py.rc, "ABCXYZ", 1)):
            try:
                bad()
            except TypeError:
                pass
            else:
                raise AssertionError("an unknown option was accepted")
        try:
            mpi4py.profile("@no-such-profiler", path=["/usr/lib"])
        except ValueError:
            pass
        else:
            raise AssertionError("a missing profiler was accepted")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mpi4py.profile("hosts", path=["/etc"])  # a file, but no library: a warning
        assert any(issubclass(w.category, UserWarning) for w in caught)
        """,
        shim=True,
    )
