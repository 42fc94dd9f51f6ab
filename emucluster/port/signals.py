"""The host's one SIGUSR1 dispatcher: the NIC's interrupt line, shared by its users.

The NIC raises SIGUSR1 at its host (thesis 3.4.1; DESIGN §5: per-port enables, the pid checked
with SO_PEERCRED) for two reasons: an application-bypass packet arrived on a port with
signals enabled (``emucluster.offload.app_bypass.shell``), or the NIC asked a GRIM port for a
translation (``emucluster.grim.endpoint``, an ``RmUpcallSignals`` port). A signal does not
say which port raised it, so this module installs one handler (SIGUSR1, plus SIGALRM for
retries) once, when the first client registers, and calls every client on each signal. A
client reads its own port's records if it safely can and returns whether it still owes work;
any client that does is called again after ``RETRY_S`` (a one-shot SIGALRM timer), so a signal
that arrived while the program was inside that client's code (never re-entered) is served
when the program has left it. The handlers are restored when the last client leaves.

Handlers install only from the main thread, on platforms with SIGUSR1: :func:`register`
returns False otherwise, and the client must be drained by its own calls.
"""

from __future__ import annotations

import signal
import threading
from typing import TYPE_CHECKING, Protocol

from emucluster import hosttime
from emutrace import recorder
from emutrace.kinds import K_SIGNAL_HANDLED

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["RETRY_S", "Client", "in_library", "inside", "register", "unregister"]

RETRY_S = 0.001  # a deferred signal is retried after this long
_LIBRARY = ("emucluster.", "nicd.")
_PROGRAM = ("emucluster.hosttime",)  # the program's own clock and compute loop: outside


class Client(Protocol):
    """A user of the NIC's signal."""

    def on_signal(self, frame: FrameType | None, retry: bool) -> bool:
        """A SIGUSR1 (``retry`` False) or a retry (True) interrupted ``frame``: read this
        client's records if it may; True if it still owes work (then it is retried)."""
        ...


_clients: list[Client] = []
_old: tuple[object, object] | None = None
_retry_armed = False
counters: dict[str, int] = dict.fromkeys(("signals", "retries"), 0)
"""Signals and retries the dispatcher took (for stats)."""


def available() -> bool:
    """Whether this process can take the NIC's signal (SIGUSR1 exists, main thread)."""
    return hasattr(signal, "SIGUSR1") and threading.current_thread() is threading.main_thread()


def register(client: Client) -> bool:
    """Call ``client`` on every SIGUSR1 from now on (installing the handlers on first use);
    False (nothing installed) where signals are not available."""
    global _old
    if not available():
        return False
    if _old is None:
        _old = (signal.signal(signal.SIGUSR1, _on_signal), signal.signal(signal.SIGALRM, _on_retry))
    if client not in _clients:
        _clients.append(client)
    return True


def unregister(client: Client) -> None:
    """Stop calling ``client``; the last one out restores the previous handlers."""
    global _old, _retry_armed
    if client in _clients:
        _clients.remove(client)
    if not _clients and _old is not None and available():
        signal.setitimer(signal.ITIMER_REAL, 0)
        _retry_armed = False
        usr1, alrm = _old
        signal.signal(signal.SIGUSR1, usr1)  # type: ignore[arg-type]
        signal.signal(signal.SIGALRM, alrm)  # type: ignore[arg-type]
        _old = None


def in_library(frame: FrameType | None) -> bool:
    """Whether the interrupted stack is inside the host library (any emucluster or nicd
    frame but `emucluster.hosttime`'s: its `spin` is the program's compute loop, where a real
    node serves the NIC's signal at once, and it holds no state a handler could disturb)."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and name.startswith(_LIBRARY) and not name.startswith(_PROGRAM):
            return True
        frame = frame.f_back
    return False


def inside(frame: FrameType | None, objects: tuple[object, ...]) -> bool:
    """Whether the interrupted stack runs a method of one of ``objects`` (``self`` is one)."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if isinstance(name, str) and name.startswith("emucluster."):  # the library's methods
            owner = frame.f_locals.get("self")
            if owner is not None and any(owner is o for o in objects):
                return True
        frame = frame.f_back
    return False


def _dispatch(frame: FrameType | None, retry: bool) -> None:
    started = hosttime.now()
    owed = False
    try:
        for client in list(_clients):
            owed = client.on_signal(frame, retry) or owed
        if owed:
            _arm_retry()
    finally:  # a `hosttime.spin` this interrupted goes on as long (a real loop would)
        hosttime.charge_handler(hosttime.now() - started)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    counters["signals"] += 1
    if recorder.tracer is not None:
        recorder.tracer.emit(K_SIGNAL_HANDLED)
    _dispatch(frame, False)


def _on_retry(signum: int, frame: FrameType | None) -> None:
    global _retry_armed
    _retry_armed = False
    counters["retries"] += 1
    _dispatch(frame, True)


def _arm_retry() -> None:
    global _retry_armed
    if not _retry_armed:
        _retry_armed = True
        signal.setitimer(signal.ITIMER_REAL, RETRY_S)
