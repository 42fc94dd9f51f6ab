"""Buffer message specs, as mpi4py accepts them, turned into a byte view, a type and a count.

Accepted forms (mpi4py's "message" argument of the uppercase calls)::

    buf                          any C-contiguous buffer (bytes, bytearray, numpy, array.array);
                                 the datatype is inferred from its format
    [buf, datatype]              the whole buffer as elements of ``datatype``
    [buf, count]                 ``count`` elements of the inferred type
    [buf, count, datatype]       the first ``count`` elements
    [buf, (count, disp), datatype]   ``count`` elements starting at element ``disp``
    [buf, count, disp, datatype]     the same
    [BOTTOM, 0, datatype]            an empty message
    datatype may also be a type code (``'i'``, ``'f8'``), as ``Datatype.fromcode`` takes
    None                         an empty message (also ``[None, datatype]``)

Receive buffers must be writable. Reading a buffer's bytes (`view.byte_view`, `typed_view`
and their errors, below the datatypes) is re-exported here for the callers of this module.
"""

from __future__ import annotations

import operator
import sys
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from emucluster.mpi.buffer.foreign import host_buffer
from emucluster.mpi.buffer.view import (
    NotABuffer,
    NotContiguous,
    ReadOnlyBuffer,
    byte_view,
    typed_view,
)
from emucluster.mpi.constants import BOTTOM
from emucluster.mpi.datatype.datatype import Datatype, predefined
from emucluster.mpi.datatype.formats import datatype_of_buffer
from emucluster.mpi.errors import ERR_ARG, ERR_BUFFER, ERR_COUNT, ERR_TYPE
from emucluster.mpi.errors import Exception as MPIException

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "EMPTY", "MessageSpecError", "Msg", "NotABuffer", "NotContiguous", "ReadOnlyBuffer",
    "UnknownTypeCode",
    "as_datatype", "byte_view", "inferred_datatype", "message", "plain_view", "typed_view",
]  # fmt: skip


class MessageSpecError(MPIException, ValueError):
    """A malformed message spec (bad count, displacement or datatype); an MPI.Exception that
    is also the ValueError mpi4py raises."""


class UnknownTypeCode(MPIException, KeyError):
    """A type code no predefined datatype has (mpi4py raises KeyError)."""


class Msg(NamedTuple):
    """A parsed message spec."""

    view: memoryview
    """The bytes of the message (format 'B', C-contiguous; writable for receives)."""
    datatype: Datatype
    """Element type."""
    elements: int
    """Number of datatype elements."""
    obj: object
    """The buffer object the program passed (numpy arrays keep their dtype and shape)."""
    deliver: Callable[[int], None] | None = None
    """For a staged receive: store the first ``nbytes`` packed bytes of ``view`` into the
    program's buffer (see `message`)."""


EMPTY = Msg(memoryview(bytearray(0)), predefined["BYTE"], 0, None)
"""The null message (writable: an empty receive writes nothing)."""


def inferred_datatype(buf: object) -> Datatype:
    """The datatype a buffer's own format says (a foreign byte order is refused)."""
    view = typed_view(buf)
    if view.format[:1] in (">", "!") if sys.byteorder == "little" else view.format[:1] == "<":
        raise NotContiguous(ERR_TYPE, f"buffer format {view.format!r} has a foreign byte order")
    return datatype_of_buffer(buf, view)


def message(spec: object, *, writable: bool, staged: bool = False) -> Msg:
    """Parse a message spec (see the module docstring). The data of a non-contiguous derived
    datatype are packed (one copy) for sending. Receiving into one needs a caller that calls
    ``msg.deliver(nbytes)`` once the packed bytes are in ``msg.view`` (``staged=True``: the
    view is then a staging buffer the deliver step unpacks from, one copy); other writable
    callers get ERR_TYPE."""
    if type(spec) is list or type(spec) is tuple:
        fast = _plain_pair(spec, writable)
        if fast is not None:
            return fast
    msg = _message(spec, writable)
    if msg.datatype.typemap.contiguous or not msg.elements:
        return msg
    if writable:
        if not staged:
            raise MPIException(
                ERR_TYPE, f"receiving into non-contiguous {msg.datatype.name} is not supported here"
            )
        return _staged(msg)
    packed = msg.datatype.pack_from(msg.view, 0, msg.elements)
    return Msg(memoryview(packed), msg.datatype, msg.elements, msg.obj)


_PLAIN_TYPES = frozenset({bytes, bytearray, memoryview, np.ndarray})
_NATIVE_FORMATS = frozenset({
    "B", "b", "c", "?", "h", "H", "i", "I", "l", "L", "q", "Q", "n", "N", "f", "d", "g",
    "Zf", "Zd", "Zg",
})  # fmt: skip
"""Native-order element formats of the predefined datatypes (what `inferred_datatype` accepts
without looking further; a test checks the two agree)."""
_PREDEFINED_SIZES: dict[int, int] = {
    id(datatype): datatype.contiguous_size
    for datatype in predefined.values()
    if datatype.contiguous_size
}
"""``id`` of each contiguous predefined datatype -> its size (they live as long as the
process, so their ids are never reused)."""


def plain_view(spec: object, writable: bool) -> memoryview | None:
    """The bytes of the commonest specs, without the general parse: a plain buffer (bytes,
    bytearray, memoryview, numpy array: C-contiguous, not empty, a native format of a
    predefined type) or ``[plain buffer, datatype]`` whose length is a whole number of
    elements of a contiguous datatype. None for anything else: `message` then parses it (or
    raises its error). What the point-to-point calls send from or receive into; a receive
    through it needs no staging (the data lands in the buffer itself)."""
    kind = type(spec)
    if kind is list or kind is tuple:
        return _pair_view(spec, writable)  # type: ignore[arg-type]
    if kind not in _PLAIN_TYPES:
        return None
    view = memoryview(spec)  # type: ignore[arg-type]
    if (writable and view.readonly) or not view.c_contiguous:
        return None
    if view.ndim == 1 and view.format == "B":
        return view
    if not view.nbytes or view.format not in _NATIVE_FORMATS:
        return None
    return view.cast("B")


def _plain_pair(spec: list[object] | tuple[object, ...], writable: bool) -> Msg | None:
    """The common spec ``[buf, datatype]`` of a plain buffer, parsed without the general
    checks (`plain_view`); None for anything else (the general path then parses it, or raises
    its error)."""
    view = _pair_view(spec, writable)
    if view is None:
        return None
    buf, datatype = spec
    assert type(datatype) is Datatype  # checked by _pair_view
    return Msg(view, datatype, len(view) // datatype.contiguous_size, buf)


def _pair_view(spec: list[object] | tuple[object, ...], writable: bool) -> memoryview | None:
    """`plain_view` of ``[buf, datatype]``."""
    if len(spec) != 2:
        return None
    buf, datatype = spec
    if type(buf) not in _PLAIN_TYPES or type(datatype) is not Datatype:
        return None
    size = _PREDEFINED_SIZES.get(id(datatype)) or datatype.contiguous_size
    if not size:
        return None
    view = memoryview(buf)  # type: ignore[arg-type]
    if writable and view.readonly:
        return None
    if not view.c_contiguous:
        return None
    if view.ndim != 1 or view.format != "B":
        fmt = view.format
        if len(fmt) != 1 and fmt not in _NATIVE_FORMATS:
            return None
        if not view.nbytes:  # cast() refuses zeros in the shape: the general path
            return None
        view = view.cast("B")
    if len(view) % size:
        return None
    return view


def _staged(msg: Msg) -> Msg:
    """A receive message whose bytes land in a packed staging buffer, unpacked by deliver."""
    datatype, target = msg.datatype, msg.view
    staging = bytearray(msg.elements * datatype.size)

    def deliver(nbytes: int) -> None:
        whole = nbytes - nbytes % datatype.size if datatype.size else 0
        datatype.unpack_into(target, 0, memoryview(staging)[:whole])

    return Msg(memoryview(staging), datatype, msg.elements, msg.obj, deliver)


def _message(spec: object, writable: bool) -> Msg:
    if spec is None:
        return EMPTY
    if isinstance(spec, list | tuple):
        return _from_sequence(list(spec), writable)
    spec = host_buffer(spec)  # CUDA-array-interface / DLPack memory (no GPUs: host memory)
    view = byte_view(spec, writable=writable)
    datatype = inferred_datatype(spec)
    return Msg(view, datatype, _whole(view, datatype), spec)


def _from_sequence(parts: list[object], writable: bool) -> Msg:
    """``[buf, count|datatype|(count, displ)]``, ``[buf, count|(count, displ), datatype]`` or
    ``[buf, count, displ, datatype]``, checked as mpi4py's ``message_simple`` checks them."""
    count_spec: object = None
    displ_spec: object = None
    type_spec: object = None
    if len(parts) == 2:
        buf, count_spec = parts
        if isinstance(count_spec, Datatype | str):
            count_spec, type_spec = None, count_spec
        elif isinstance(count_spec, tuple | list):
            count_spec, displ_spec = count_spec
    elif len(parts) == 3:
        buf, count_spec, type_spec = parts
        if isinstance(count_spec, tuple | list):
            count_spec, displ_spec = count_spec
    elif len(parts) == 4:
        buf, count_spec, displ_spec, type_spec = parts
    else:
        raise MessageSpecError(ERR_ARG, "message: expecting 2 to 4 items")
    datatype = as_datatype(type_spec) if type_spec is not None else None
    if buf is BOTTOM or buf is None:
        if buf is BOTTOM and datatype is None:
            raise MessageSpecError(ERR_TYPE, "message: BOTTOM needs a datatype")
        view = memoryview(bytearray(0))
        datatype = datatype or predefined["BYTE"]
    else:
        buf = host_buffer(buf)
        view = byte_view(buf, writable=writable)
        if datatype is None:
            datatype = inferred_datatype(buf)
    length, offset = len(view), 0
    if displ_spec is not None:
        displ = operator.index(displ_spec)  # type: ignore[arg-type]
        if displ < 0:
            raise MessageSpecError(ERR_ARG, f"message: negative displacement {displ}")
        if displ > 0:
            extent = _extent(datatype, "cannot handle displacement")
            if displ * extent > length:
                raise MessageSpecError(ERR_ARG, f"message: displacement {displ} out of bounds")
            offset = displ * extent
            length -= offset
    if count_spec is not None:
        count = operator.index(count_spec)  # type: ignore[arg-type]
        if count < 0:
            raise MessageSpecError(ERR_COUNT, f"message: negative count {count}")
        if count > 0 and (buf is None or buf is BOTTOM):
            raise MessageSpecError(ERR_COUNT, f"message: buffer is {buf} but count is {count}")
    elif length > 0:
        extent = _extent(datatype, "cannot infer count")
        if length % extent:
            raise MessageSpecError(
                ERR_BUFFER,
                f"message: cannot infer count, buffer length "
                f"{length} is not a multiple of datatype extent {extent}",
            )
        count = length // extent
    else:
        count = 0
    end = offset + datatype.span(count)
    if end > len(view):  # mpi4py leaves this to MPI (a crash); here it is a ValueError too
        raise MessageSpecError(
            ERR_COUNT,
            f"{count} elements at byte {offset} need {end} bytes; the buffer has {len(view)}",
        )
    return Msg(view[offset:end], datatype, count, buf)


def as_datatype(spec: object) -> Datatype:
    """The datatype of a spec's type item: a Datatype, or a type code (KeyError-compatible
    error if unknown)."""
    if isinstance(spec, Datatype):
        return spec
    if isinstance(spec, str):
        try:
            return Datatype.fromcode(spec)
        except ValueError:
            raise UnknownTypeCode(ERR_TYPE, f"message: unknown type code {spec!r}") from None
    raise NotABuffer(ERR_TYPE, f"message: {spec!r} is not a datatype")


def _extent(datatype: Datatype, what: str) -> int:
    if not datatype:
        raise MessageSpecError(ERR_TYPE, f"message: {what}, datatype is null")
    extent = datatype.extent
    if extent <= 0:
        raise MessageSpecError(ERR_TYPE, f"message: {what}, datatype extent {extent}")
    return extent


def _whole(view: memoryview, datatype: Datatype) -> int:
    size = datatype.extent
    if size == 0:
        return 0
    if len(view) % size:
        raise MPIException(
            ERR_BUFFER, f"buffer of {len(view)} bytes is not a multiple of {datatype.name}'s {size}"
        )
    return len(view) // size
