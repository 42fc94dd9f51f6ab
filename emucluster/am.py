"""GRIM active messages (seed 002 §4.4) for programs run by emurun, with or without MPI.

    from emucluster import am

    def ping(src, args, payload):
        am.send(src, "pong", args, payload)      # a handler may reply; it never blocks

    am.register("ping", ping)
    am.sync()                                    # publish to the job's registry
    am.send(1, "ping", (1, 2, 3, 4), b"hello")
    am.poll()                                    # run handlers of waiting messages

Handlers are ``handler(src_rank, args, payload)``; ``args`` are four 32-bit words. Every call
here polls; ``start_polling()`` adds a polling thread. Names are published with ``sync()``
to the global registry (served by node 0's NIC), which assigns cluster-wide ids; ``send``
and ``handler_id`` ask it for names not known locally. These functions use the default
endpoint (logical channel ``GRIM_CHANNEL``); ``Endpoint(channel=k)`` gives more channels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.grim import GRIM_CHANNEL, Endpoint, default_endpoint

if TYPE_CHECKING:
    from collections.abc import Callable

    from emucluster.grim.amcore import Args

__all__ = [
    "GRIM_CHANNEL",
    "Endpoint",
    "barrier",
    "endpoint",
    "handler_id",
    "poll",
    "register",
    "send",
    "start_polling",
    "stats",
    "stop_polling",
    "sync",
]


def endpoint() -> Endpoint:
    """The default endpoint (opened on first use)."""
    return default_endpoint()


def register(name: str, handler: Callable[[int, Args, bytes], object]) -> None:
    """Register ``handler(src_rank, args, payload)`` locally under ``name``."""
    default_endpoint().register(name, handler)


def sync() -> dict[str, int]:
    """Publish locally registered handlers; return the cluster-wide name -> id table."""
    return default_endpoint().sync()


def handler_id(name: str) -> int:
    """The cluster-wide id of ``name`` (KeyError if nobody published it)."""
    return default_endpoint().handler_id(name)


def send(
    dest_rank: int,
    name_or_id: str | int,
    args: Args = (0, 0, 0, 0),
    payload: bytes | bytearray | memoryview = b"",
) -> None:
    """Send an active message to ``dest_rank``."""
    default_endpoint().send(dest_rank, name_or_id, args, payload)


def poll() -> int:
    """Run the handlers of waiting messages; return how many ran."""
    return default_endpoint().poll()


def start_polling(interval_s: float = 0.0002) -> None:
    """Poll from a background thread."""
    default_endpoint().start_polling(interval_s)


def stop_polling() -> None:
    """Stop the polling thread."""
    default_endpoint().stop_polling()


def barrier() -> None:
    """Wait for every rank (active messages through rank 0; syncs unsynced handlers)."""
    default_endpoint().barrier()


def stats() -> dict[str, object]:
    """Host-side counters of the default endpoint."""
    return default_endpoint().stats()
