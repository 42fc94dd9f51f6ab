"""GRIM on the host (seed 002): endpoints, active messages and remote memory.

``endpoint`` is the shell (one GM port per logical channel) and its active-message half,
``rm`` its remote-memory half, ``port`` the pieces it hands out (handles, blocks, requests) and
the port's GRIM sinks (the "kernel"), ``amcore`` and ``rmalloc`` the pure parts (handler table
and overflow queue; the registered-memory allocator). Programs use the facades
``emucluster.am`` and ``emucluster.rm``, or an :class:`Endpoint` for more channels.
"""

from __future__ import annotations

from emucluster.grim.endpoint import GRIM_CHANNEL, Endpoint, default_endpoint
from emucluster.grim.port import Block, Handle, RMError, RmRequest

__all__ = [
    "GRIM_CHANNEL",
    "Block",
    "Endpoint",
    "Handle",
    "RMError",
    "RmRequest",
    "default_endpoint",
]
