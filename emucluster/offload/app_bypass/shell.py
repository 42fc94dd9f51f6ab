"""The application-bypass shell of one rank: signal client, packet hook, NIC signal control.

Installed at Init (only the packet hook: a child's packet may arrive before this rank's
first application-bypass Reduce); the signal handlers follow when signals are first enabled.
Reduce uses it with algorithm ``app-bypass`` (``EMU_REDUCE=app-bypass``, ``emurun --reduce
app-bypass`` or ``algorithm="app-bypass"``). It is the `BypassService` of
``emucluster.offload.app_bypass.core`` and carries out that core's actions:

* Fig 3.4: the progress engine hands every AB_COLL packet to `Bypass.on_packet`. A packet
  flagged for the root of its instance goes to the default point-to-point matching; any
  other goes to the asynchronous part (Fig 3.5) of the core.
* The NIC raises SIGUSR1 for an AB_COLL packet only while signals are enabled (only while
  reductions are outstanding and no synchronous part runs). The handler runs the progress
  engine, then acknowledges by re-enabling (with the count of packets seen, so none that
  arrived meanwhile is missed) or disables signals if nothing is outstanding any more.
* The SIGUSR1 handler is the host's one dispatcher, ``emucluster.port.signals`` (shared with
  GRIM's translation upcalls); this shell is one of its clients. A signal that arrives while
  the program is inside the MPI library (any emucluster or nicd frame on the interrupted
  stack) is deferred, never re-entrant: the library is making progress itself or soon
  returns; the dispatcher's one-shot timer (SIGALRM, ``RETRY_S``) retries until the program
  is outside the library.
* Finalize (and exit) first waits until every outstanding reduction completed.

``EMU_AB_DELAY_US`` (``HostConfig.ab_delay_us``) sets the optional delay before an internal
node leaves Reduce with children outstanding (thesis 3.3.5; default 0: off).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from emucluster.config import HostConfig
from emucluster.offload.app_bypass.core import AppBypass, InstanceKey, SendUp, SetSignals
from emucluster.port import signals
from emucluster.port.progress import MPI_PORT
from emucluster.port.signals import RETRY_S, in_library
from nicd.contract import MsgType

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType

    from emucluster.coll.context import CollContext, CollRequest
    from emucluster.offload.app_bypass.core import Action
    from emucluster.port.client import RecvEvent
    from emucluster.port.progress import Progress

__all__ = ["AB_TO_ROOT", "RETRY_S", "Bypass", "active", "install", "shutdown"]

AB_TO_ROOT = 0x1  # AB_COLL flag (AM-handler field): for the root of its instance (Fig 3.4)
DRAIN_TIMEOUT_S = 30.0  # longest Finalize waits for outstanding reductions
_U32 = 0xFFFFFFFF

_bypass: Bypass | None = None


def active() -> Bypass | None:
    """The installed shell, if any reduce used application bypass."""
    return _bypass


def install(engine: Progress, config: HostConfig | None = None) -> Bypass:
    """The shell for ``engine`` (installed on first call; ``config``: the environment's)."""
    global _bypass
    if _bypass is None or _bypass.engine is not engine:
        _bypass = Bypass(engine, config)
    return _bypass


def shutdown(timeout: float = DRAIN_TIMEOUT_S) -> None:
    """Finalize: complete outstanding reductions, disable signals, restore the handlers (the
    shell stays readable for the final statistics)."""
    if _bypass is not None:
        _bypass.close(timeout)


class Bypass:
    """The application-bypass shell of one rank (one per process)."""

    def __init__(self, engine: Progress, config: HostConfig | None = None) -> None:
        self.engine = engine
        self.core = AppBypass()
        self.eager_limit = engine.eager_limit
        self.delay_s = (config or HostConfig.from_env()).ab_delay_us / 1e6
        self.seen = 0
        """AB_COLL packets taken in (the NIC compares it with what it delivered)."""
        self.signals_on = False
        self.owe_ack = False
        self.counters: dict[str, int] = dict.fromkeys(
            ("signals", "signals_deferred", "signal_runs", "retries", "root_packets",
             "enables", "disables"), 0
        )  # fmt: skip
        engine.hooks[int(MsgType.AB_COLL)] = self.on_packet
        self._registered = False
        self.async_cpu_s = 0.0
        """Process CPU seconds spent in signal-driven progress (benchmarks subtract it from
        the busy loop it interrupted)."""

    def _ensure_handlers(self) -> None:
        if not self._registered:
            self._registered = signals.register(self)

    # -- BypassService ----------------------------------------------------------------------

    def instance(self, ctx: CollContext, tag: int) -> InstanceKey:
        """The instance key of this call (its collective context id and wire tag)."""
        context, wire_tag = ctx.wire(tag)  # type: ignore[attr-defined]
        return InstanceKey(context, wire_tag)

    def execute(self, actions: list[Action]) -> list[CollRequest]:
        """Carry out the core's actions; sends still in progress come back."""
        waiting: list[CollRequest] = []
        for action in actions:
            if type(action) is SendUp:
                op = self._send_up(action)
                if op is not None and not op.done:
                    waiting.append(op)
            elif type(action) is SetSignals:
                self._set_signals(action.enabled)
        return waiting

    def progress(self) -> None:
        """One non-blocking progress pass."""
        self.engine.poll()

    def linger(self, done: Callable[[], bool]) -> None:
        """Thesis 3.3.5: poll up to ``delay_s`` for late children before leaving Reduce."""
        if self.delay_s <= 0:
            return
        end = time.monotonic() + self.delay_s
        while not done() and time.monotonic() < end:
            self.engine.poll()

    # -- the progress engine's hook (Fig 3.4) -----------------------------------------------

    def on_packet(self, event: RecvEvent) -> None:
        """An AB_COLL packet: the root's go to default matching, others to Fig 3.5."""
        self.seen = (self.seen + 1) & _U32
        args = event.args
        if event.am_handler & AB_TO_ROOT:
            self.counters["root_packets"] += 1
            self.engine.inject(event.src_node, MsgType.MPI_EAGER, args, event.payload)
            return
        self.execute(self.core.on_packet(InstanceKey(args[0], args[2]), args[1], event.payload))

    # -- signals ----------------------------------------------------------------------------

    def on_signal(self, frame: FrameType | None, retry: bool) -> bool:
        """The dispatcher's call (`emucluster.port.signals`): a SIGUSR1 (which may be another
        client's: ignored while this side has signals off) or a retry of a deferred one.
        Inside the library the signal is deferred, never re-entrant: the library is making
        progress itself or soon returns; the dispatcher retries."""
        if retry:
            if not self.owe_ack:
                return False
            self.counters["retries"] += 1
        else:
            if not self.signals_on:
                return False
            self.counters["signals"] += 1
            self.owe_ack = True
        if in_library(frame):
            if not retry:
                self.counters["signals_deferred"] += 1
            return True
        self._run_async()
        return False

    def _run_async(self) -> None:
        """Outside the library: run the progress engine, then acknowledge or disable."""
        self.counters["signal_runs"] += 1
        started = time.process_time()
        self.owe_ack = False  # a signal from now on is owed anew (it defers: we are inside)
        while self.engine.poll():
            pass
        if self.core.outstanding:
            self._set_signals(True, ack=True)
        else:
            self._set_signals(False)
        self.async_cpu_s += time.process_time() - started

    def _set_signals(self, enabled: bool, *, ack: bool = False) -> None:
        """Enable (acknowledging the last signal) or disable signals at the NIC. The owed
        acknowledgement is settled *before* the record goes out: the NIC may raise a signal
        for a packet this side has not seen yet as soon as it reads the record, and that
        signal (deferred, we are inside the library) must stay owed, or its packet would wait
        unprocessed until the program next enters MPI."""
        port = self.engine.port
        if enabled:
            if self.signals_on and not self.owe_ack and not ack:
                return
            self._ensure_handlers()
            self.owe_ack = False
            self.signals_on = True  # before the record: a signal for it is this side's
            port.enable_signals(self.seen)
            self.counters["enables"] += 1
        else:
            if not self.signals_on:
                return
            self.owe_ack = False
            self.signals_on = False
            port.disable_signals()
            self.counters["disables"] += 1

    # -- sends ------------------------------------------------------------------------------

    def _send_up(self, up: SendUp) -> CollRequest | None:
        engine = self.engine
        key = up.key
        if not up.parent_is_root:
            engine.port.send_collective(up.parent_node, MPI_PORT, up.payload,
                                        args=(key.context, up.source, key.tag, 0))  # fmt: skip
            return None
        # The root receives by default matching: a point-to-point eager message, sent as an
        # AB_COLL packet flagged for the root (a rendezvous, for a large object, as usual).
        eager_as = (MsgType.AB_COLL, AB_TO_ROOT)
        return engine.send(key.context, up.source, key.tag, up.parent_node, up.payload,
                           eager_as=eager_as)  # fmt: skip

    # -- lifecycle --------------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """Shell and core counters, JSON-able."""
        return {**self.core.stats(), **self.counters, "seen": self.seen,
                "signals_enabled": self.signals_on, "delay_us": self.delay_s * 1e6,
                "async_cpu_s": self.async_cpu_s}  # fmt: skip

    def close(self, timeout: float) -> None:
        """Complete outstanding reductions, disable signals, put the old handlers back."""
        core = self.core
        try:
            if core.outstanding and not self.engine.wait_for(lambda: not core.outstanding, timeout):
                raise TimeoutError(f"{core.outstanding} application-bypass reductions never "
                                   "completed")  # fmt: skip
        finally:
            self._set_signals(False)
            if self._registered:
                signals.unregister(self)
                self._registered = False
            self.engine.hooks.pop(int(MsgType.AB_COLL), None)
