"""The host <-> NIC contract: everything a host library may take from nicd, in one module.

A host (``emucluster``) talks to its NIC over the PCI socket in host records and puts message
types, GRIM fields, active-message registry requests and NICVM modules into the messages it
sends; it compiles a NICVM module before uploading it, and stops when its launcher dies. A rank
that a PMI launcher started (``emucluster.pmi``) also starts its own nicd as emurun would: it
reads the nicd's ready line, installs its routing table, holds its lifeline and derives its
fault seed. Those
names are re-exported here, and only those: ``emucluster`` imports ``nicd.contract`` and no
other module of nicd (``tests/unit/test_layering.py`` checks it), so the rest of nicd may move
and change without a host noticing, and what a host depends on is read in one place. A name a
host needs is added here, not imported from the module that owns it.

Why a module of its own rather than the ``nicd.hostlink`` facade: the contract takes from
rooms that import ``hostlink`` themselves (``link/`` for message types, ``grim/``, ``nicvm/``),
so a facade in ``hostlink`` would import back up into them. Nothing in nicd imports this module.

Importing it costs what a host paid before: the records and their codec, the wire's message
types, the GRIM field layouts, the lifeline, the ready line and the management client (a few
small modules). The NICVM virtual machine is not loaded, and the
compiler (with lark) only by the first :func:`compile_module` call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nicd.config import FaultConfig, node_fault_seed
from nicd.core.ready import BadReadyLine, Ready, decode_ready_untrusted, socket_path
from nicd.errors import NicdError
from nicd.grim.amregistry import MAX_HANDLER_ID as AM_MAX_HANDLER_ID
from nicd.grim.amregistry import decode_reply as decode_am_reply
from nicd.grim.amregistry import encode_request as encode_am_request
from nicd.grim.atomics import ELEMENT_CODES as ATOMIC_ELEMENT_CODES
from nicd.grim.atomics import AtomicOp, apply_atomic
from nicd.grim.atomics import pack_meta as pack_atomic_meta
from nicd.grim.locks import Granted as LockGranted
from nicd.grim.locks import LockTable
from nicd.grim.locks import Outcome as LockOutcome
from nicd.grim.locks import Waiter as LockWaiter
from nicd.grim.xlate import AddressMap, Translation
from nicd.hostlink import (
    ANY_PORT,
    MAX_RECORD_BYTES,
    NICVM_MAX_DELEGATE,
    Assembler,
    CloseReq,
    DeregisterReq,
    ErrorEvent,
    HostRecord,
    McastErrorEvent,
    McastFreeReq,
    McastGroupOk,
    McastGroupReq,
    McastSendReq,
    MultiSendReq,
    NicvmCommReq,
    NicvmDelegateReq,
    NicvmDone,
    NicvmListReq,
    NicvmLoadReq,
    NicvmPurgeReq,
    NicvmReply,
    NicvmReport,
    Opened,
    OpenReq,
    ProvideReq,
    RecvEvent,
    Refused,
    Registered,
    RegisterReq,
    RmWriteEvent,
    SendReq,
    SentBatch,
    SentEvent,
    SignalCtl,
    StatsReply,
    StatsReq,
    encode_record,
)
from nicd.hostlink.grim import (
    NIC_PORT,
    NOTIFY_P,
    READ_META,
    REGISTRY_NODE,
    RmFlags,
    RmLanded,
    RmMapReq,
    RmStatus,
    RmStatusEvent,
    RmUnmapReq,
    RmUpcallSignals,
    RmWatch,
    RmXlateReply,
    RmXlateReq,
)
from nicd.link.wire import MsgType
from nicd.nicvm.errors import NicvmError
from nicd.nicvm.modules import BCAST_BINARY_TREE
from nicd.nicvm.packet import encode_preamble
from nicd.shell.lifeline import Lifeline
from nicd.shell.lifeline import watch as watch_lifeline
from nicd.shell.manage import set_routes

if TYPE_CHECKING:
    from nicd.nicvm.program import Module

__all__ = [
    "AM_MAX_HANDLER_ID",
    "ANY_PORT",
    "ATOMIC_ELEMENT_CODES",
    "BCAST_BINARY_TREE",
    "MAX_RECORD_BYTES",
    "NICVM_MAX_DELEGATE",
    "NIC_PORT",
    "NOTIFY_P",
    "READ_META",
    "REGISTRY_NODE",
    "AddressMap",
    "Assembler",
    "AtomicOp",
    "BadReadyLine",
    "CloseReq",
    "DeregisterReq",
    "ErrorEvent",
    "FaultConfig",
    "HostRecord",
    "Lifeline",
    "LockGranted",
    "LockOutcome",
    "LockTable",
    "LockWaiter",
    "McastErrorEvent",
    "McastFreeReq",
    "McastGroupOk",
    "McastGroupReq",
    "McastSendReq",
    "MsgType",
    "MultiSendReq",
    "NicdError",
    "NicvmCommReq",
    "NicvmDelegateReq",
    "NicvmDone",
    "NicvmError",
    "NicvmListReq",
    "NicvmLoadReq",
    "NicvmPurgeReq",
    "NicvmReply",
    "NicvmReport",
    "OpenReq",
    "Opened",
    "ProvideReq",
    "Ready",
    "RecvEvent",
    "Refused",
    "RegisterReq",
    "Registered",
    "RmFlags",
    "RmLanded",
    "RmMapReq",
    "RmStatus",
    "RmStatusEvent",
    "RmUnmapReq",
    "RmUpcallSignals",
    "RmWatch",
    "RmWriteEvent",
    "RmXlateReply",
    "RmXlateReq",
    "SendReq",
    "SentBatch",
    "SentEvent",
    "SignalCtl",
    "StatsReply",
    "StatsReq",
    "Translation",
    "apply_atomic",
    "compile_module",
    "decode_am_reply",
    "decode_ready_untrusted",
    "encode_am_request",
    "encode_preamble",
    "encode_record",
    "node_fault_seed",
    "pack_atomic_meta",
    "set_routes",
    "socket_path",
    "watch_lifeline",
]


def compile_module(source: str) -> Module:
    """Compile a NICVM module's ``source`` with nicd's own compiler, as the NIC will at upload;
    raise :class:`NicvmError` (with ``.line``, ``.column``, ``.snippet``) if it would not
    compile there."""
    # Start-up cost: the compiler imports lark (~40 ms) and the VM (~25 ms), which a host that
    # never checks a module should not pay at import.
    from nicd.nicvm.compiler import compile_module as compile_source

    return compile_source(source)
