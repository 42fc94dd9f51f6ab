"""emucluster.pep688: a subclass of `BufferExporter` exports what its ``__buffer__`` returns, on
Python 3.11 through the C type of ``_exporter.c`` (built by ``pip install`` where a C compiler
works), on 3.12 by Python itself; without the extension on 3.11 there is no export."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap

import pytest

from emucluster.pep688 import BACKPORT, EXPORTS, BufferExporter

needs_export = pytest.mark.skipif(
    not EXPORTS, reason="Python 3.11 without the C extension (a pure-Python install) exports none"
)


class Slotted:
    __slots__ = ("data",)


class Memory(Slotted, BufferExporter):
    """A slotted class (as the MPI handles are) that exports its bytearray."""

    __slots__ = ("calls",)

    def __init__(self, data: bytearray) -> None:
        self.data = data
        self.calls: list[int] = []

    def __buffer__(self, flags: int) -> memoryview:
        self.calls.append(flags)
        return memoryview(self.data)


class Raising(BufferExporter):
    def __buffer__(self, flags: int) -> memoryview:
        raise KeyError("no memory here")


class WrongType(BufferExporter):
    def __buffer__(self, flags: int) -> memoryview:
        return b"bytes"  # type: ignore[return-value]


class ReadOnly(BufferExporter):
    def __buffer__(self, flags: int) -> memoryview:
        return memoryview(b"fixed")


@needs_export
def test_a_view_reads_and_writes_the_bytes_buffer_gives() -> None:
    data = bytearray(b"abcdefgh")
    memory = Memory(data)
    view = memoryview(memory)
    assert (view.tobytes(), view.readonly, view.nbytes) == (b"abcdefgh", False, 8)
    view[0:2] = b"XY"
    assert data == bytearray(b"XYcdefgh")
    data[7] = ord("Z")
    assert view.cast("B")[7] == ord("Z")
    assert len(memory.calls) == 1
    assert bytes(memory) == b"XYcdefgZ"  # any consumer of a buffer, not only memoryview


@needs_export
def test_the_export_holds_until_the_consumer_releases_it() -> None:
    data = bytearray(b"1234")
    view = memoryview(Memory(data))
    with pytest.raises(BufferError):
        data.extend(b"5")  # exported: a bytearray may not resize
    view.release()
    data.extend(b"5")
    assert data == bytearray(b"12345")


@needs_export
def test_an_exception_in_buffer_is_the_consumers_exception() -> None:
    with pytest.raises(KeyError, match="no memory here"):
        memoryview(Raising())
    with pytest.raises(TypeError, match="memoryview"):
        memoryview(WrongType())


@needs_export
def test_a_read_only_buffer_refuses_a_writable_request() -> None:
    view = memoryview(ReadOnly())
    assert (view.readonly, view.tobytes()) == (True, b"fixed")
    with pytest.raises((TypeError, BufferError)):
        (ctypes.c_char * 5).from_buffer(ReadOnly())  # asks for a writable buffer


@pytest.mark.skipif(not BACKPORT, reason="the C type exists on Python < 3.12 when built")
def test_the_c_type_without_buffer_is_no_buffer() -> None:
    from emucluster.pep688._exporter import Exporter

    with pytest.raises(TypeError, match="__buffer__"):
        memoryview(Exporter())


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.11's fallback")
def test_without_the_extension_python_311_exports_nothing() -> None:
    """A pure-Python install (the extension cannot be imported): the base is a plain class and
    ``memoryview`` refuses, as Python 3.11 does for any class."""
    program = textwrap.dedent(
        """
        import sys
        from importlib.abc import MetaPathFinder

        class NoExtension(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "emucluster.pep688._exporter":
                    raise ImportError("a pure-Python install")
                return None

        sys.meta_path.insert(0, NoExtension())
        from emucluster.pep688 import BACKPORT, EXPORTS, BufferExporter

        class Memory(BufferExporter):
            def __buffer__(self, flags):
                return memoryview(bytearray(4))

        try:
            memoryview(Memory())
        except TypeError:
            print(BACKPORT, EXPORTS, BufferExporter.__module__, "TypeError")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.stdout.split() == ["False", "False", "emucluster.pep688", "TypeError"], (
        result.stderr
    )
