"""Ports and names: ``Open_port``/``Close_port``, ``Intracomm.Accept``/``Connect``,
``Comm.Join``, ``Publish_name``/``Lookup_name``/``Unpublish_name``.

A port name is ``emucluster-port:<node>:<tag>``: the node of the process that opened it and a
tag unique in that process. ``Accept``'s root waits on that tag for a connecting root, from
any node of the fabric (the job's nodes and those started at run time); then both groups agree
as for a spawn (`emucluster.mpi.dynamic.join`). Nodes of another job are not on this fabric:
``Connect`` to one raises (the send to an unrouted node fails). Names are published in the
launcher of the job (`emucluster.mpi.dynamic.client`), so they are seen by every process of
the job and of the processes it spawned.

``Join(fd)``: the two processes trade their node ids over the socket ``fd`` (4 bytes each
way), then join as two COMM_SELF groups; both must be on this job's fabric.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import struct
from typing import TYPE_CHECKING

from emucluster.mpi import lifecycle
from emucluster.mpi.comm.state import CommState
from emucluster.mpi.dynamic import client, wire
from emucluster.mpi.dynamic.join import accept_swap, connect_swap, join, swap_with
from emucluster.mpi.errors import ERR_COMM, ERR_NAME, ERR_OTHER, ERR_PORT, ERR_ROOT, ERR_SERVICE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.info import INFO_NULL, Info

if TYPE_CHECKING:
    from emucluster.mpi.comm.comm import Comm
    from emucluster.mpi.comm.intercomm import Intercomm

__all__ = [
    "Close_port",
    "Lookup_name",
    "Open_port",
    "Publish_name",
    "Unpublish_name",
    "accept",
    "connect",
    "join_fd",
]

_PORT = re.compile(r"emucluster-port:([0-9]{1,5}):([0-9]{1,10})")
_TAGS = itertools.count(1 << 30)
"""Port tags (above every spawn id, so a port's trade never meets a spawn's)."""
_JOIN_TAG = (1 << 30) - 1
_open: set[str] = set()


def Open_port(info: Info = INFO_NULL) -> str:
    """A new port name of this process (``emucluster-port:<node>:<tag>``)."""
    name = f"emucluster-port:{lifecycle.current().node}:{next(_TAGS)}"
    _open.add(name)
    return name


def Close_port(port_name: str) -> None:
    """Release a port this process opened (ERR_PORT for another name)."""
    if port_name not in _open:
        raise MPIException(ERR_PORT, f"{port_name!r} is not a port this process opened")
    _open.discard(port_name)


def _parse(port_name: object) -> tuple[int, int]:
    found = _PORT.fullmatch(port_name) if isinstance(port_name, str) else None
    if found is None:
        raise MPIException(ERR_PORT, f"{port_name!r} is not a port name (Open_port makes one)")
    return int(found[1]), int(found[2])


def _group(comm: Comm, root: int) -> CommState:
    st = comm._state()
    if st.local is not None:
        raise MPIException(ERR_COMM, "Accept/Connect on an intercommunicator")
    if not 0 <= root < st.size:
        raise MPIException(ERR_ROOT, f"root {root} of {st.size}")
    return st


def accept(comm: Comm, port_name: str | None = None, info: Info = INFO_NULL,
           root: int = 0) -> Intercomm:  # fmt: skip
    """``Intracomm.Accept``: wait for one ``Connect`` to ``port_name`` (significant at
    ``root``, which must have opened it; collective over ``comm``)."""
    st = _group(comm, root)
    swap = None
    if st.rank == root:
        if port_name not in _open:
            raise MPIException(ERR_PORT, f"{port_name!r} is not a port this process opened")
        swap = accept_swap(st.runtime, _parse(port_name)[1])
    return join(st, root, swap or _never)


def connect(comm: Comm, port_name: str | None = None, info: Info = INFO_NULL,
            root: int = 0) -> Intercomm:  # fmt: skip
    """``Intracomm.Connect``: reach the group accepting on ``port_name`` (significant at
    ``root``; collective over ``comm``)."""
    st = _group(comm, root)
    swap = None
    if st.rank == root:
        node, tag = _parse(port_name)
        swap = connect_swap(st.runtime, node, tag)
    return join(st, root, swap or _never)


def _never(_mine: object) -> object:
    raise AssertionError("only the root trades")  # join runs the swap at the root alone


def join_fd(fd: int) -> Intercomm:
    """``Comm.Join``: an intercommunicator with the process at the other end of socket
    ``fd`` (each side's COMM_SELF a group)."""
    rt = lifecycle.current()
    try:
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.sendall(struct.pack(">I", rt.node))
            data = b""
            while len(data) < 4:
                chunk = sock.recv(4 - len(data))
                if not chunk:
                    raise MPIException(ERR_OTHER, "Join: the other side closed the socket")
                data += chunk
    except OSError as exc:
        raise MPIException(ERR_OTHER, f"Join: {exc}") from None
    (peer,) = struct.unpack(">I", data)
    if peer == rt.node:
        raise MPIException(ERR_OTHER, "Join: both ends of the socket are this process")
    return join(CommState(rt, 2, (rt.node,), 0), 0, swap_with(rt, peer, _JOIN_TAG))


def _ask(request: wire.Request, error_class: int) -> wire.Reply:
    return client.ask(lifecycle.current().config.run_dir, request, error_class)


def Publish_name(service_name: str, port_name: str, info: Info = INFO_NULL) -> None:
    """Publish ``port_name`` under ``service_name`` in the job (ERR_SERVICE if taken)."""
    _ask(wire.Publish(str(service_name), str(port_name)), ERR_SERVICE)


def Lookup_name(service_name: str, info: Info = INFO_NULL) -> str:
    """The port published under ``service_name`` (ERR_NAME if none)."""
    return _ask(wire.Lookup(str(service_name)), ERR_NAME).port


def Unpublish_name(service_name: str, port_name: str, info: Info = INFO_NULL) -> None:
    """Withdraw a published name (ERR_SERVICE if it is not published with ``port_name``)."""
    _ask(wire.Unpublish(str(service_name), str(port_name)), ERR_SERVICE)
