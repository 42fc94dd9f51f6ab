"""NicConfig: every tunable of one nicd, with its default and meaning.

``FaultConfig`` and ``FAULT_ENV`` are also a contract with whoever starts nicd: emurun builds
its fault flags from them and passes them on with :meth:`FaultConfig.flags`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from nicd.errors import UsageError

__all__ = [
    "FAULT_ENV",
    "RECOVERY_MODES",
    "CoalesceConfig",
    "FaultConfig",
    "NicConfig",
    "NicvmConfig",
    "Recovery",
    "TransportConfig",
    "fault_flag",
    "node_fault_seed",
]

Recovery = Literal["gbn", "selective"]
RECOVERY_MODES: tuple[Recovery, ...] = ("gbn", "selective")
"""``nicd --recovery``: go-back-N (the default, the papers' figures) or selective."""


@dataclass(frozen=True, slots=True)
class TransportConfig:
    """Reliable-transport tunables (DESIGN §4)."""

    mtu: int = 4096
    """Largest payload per packet in bytes; longer messages are fragmented."""
    window: int = 64
    """Most unacknowledged packets per stream (go-back-N window W)."""
    min_window: int = 16
    """A loss never cuts the effective window below this. Loss here is injected, not
    congestion, and go-back-N over a ~1 ms RTT needs a deep window (bench: at 5 % loss,
    64 KiB streams ran at ~9 MB/s with a floor of 2 and ~38 MB/s with 16)."""
    ack_every: int = 16
    """A receiver acknowledges at once after this many unacknowledged packets of a stream;
    otherwise ``ack_delay_s`` after the first of them (delayed ACK)."""
    ack_delay_s: float = 0.001
    """How long an ACK may wait for more packets to cover (0: at the end of the burst).
    Every ACK costs a datagram and a wake-up of the sending NIC and its host."""
    rto_initial_s: float = 0.05
    """Retransmission timeout before any RTT sample."""
    rto_min_s: float = 0.004
    """Lower bound of the adaptive RTO."""
    rto_max_s: float = 1.0
    """Upper bound of the adaptive RTO, also the cap of exponential backoff."""
    no_buffer_retry_s: float = 0.02
    """Delay before retrying after a NO_BUFFER NACK when no RESUME arrives sooner."""
    probe_interval_s: float = 0.1
    """While data to a peer is outstanding and nothing came from it for this long, send it a
    liveness probe (PING, answered by its NIC whatever its ports do) at this fixed interval."""
    dead_peer_timeout_s: float = 3.0
    """A peer is dead after this much silence while data to it is outstanding, counted in
    time our own loop ran (a stall of ours longer than a few probe intervals counts as a
    few probe intervals), ..."""
    dead_peer_probes: int = 20
    """... and only after at least this many probes went unanswered."""
    no_port_timeout_s: float = 5.0
    """A stream whose receiver answers NO_PORT for this long fails its messages ``no_port``."""
    no_buffer_timeout_s: float = 300.0
    """A stream whose receiver refuses NO_BUFFER for this long fails its messages
    ``no_buffer`` (the peer stays alive; GM itself waits for ever)."""
    max_message: int = 1 << 24
    """Largest message a receiver reassembles, in bytes; a longer one is refused (NACK
    ABORTED: the sender's request fails ``aborted``)."""
    nack_repeat_s: float = 0.005
    """A go-back-N receiver repeats its GAP NACK while the gap persists: this long after the
    first, then twice as long each time, :data:`~nicd.link.reliable.NACK_REPEATS` times at
    most, so a lost NACK costs about this long instead of a whole RTO."""
    idle_stream_s: float = 60.0
    """An incoming stream that heard nothing for this long and owes nothing (no partial
    message, no ACK) is forgotten, counted ``streams_evicted``; an outgoing one with nothing
    in flight for half as long is retired (``streams_retired``), and the next message on it
    starts a new stream epoch, so the receiver never sees an old epoch continue after it
    forgot it. Evictions run when new streams are made (no timer)."""
    epoch_seed: int = 0
    """The first stream epoch (16-bit) this transport hands out; the daemon picks it at
    random, so a restarted nicd's streams are not taken for its old ones."""
    recovery: Recovery = "gbn"
    """Loss recovery. ``gbn``: a receiver drops what arrives out of order and NACKs the gap;
    the sender goes back N. ``selective``: a receiver holds out-of-order packets within the
    window and SACKs them; the sender resends only the holes, found by time (RACK: sent before
    a packet that was delivered, resends included), and probes a silent tail after ~2 RTT
    (tail-loss probe) instead of waiting for the RTO. Modes interoperate (a sender handles
    SACKs and GAP NACKs alike); the receiver's mode decides which it gets."""


FAULT_ENV: Final[Mapping[str, str]] = MappingProxyType(
    {
        "loss": "EMU_LOSS",
        "dup": "EMU_DUP",
        "reorder": "EMU_REORDER",
        "corrupt": "EMU_CORRUPT",
        "delay_ms": "EMU_DELAY_MS",
        "fault_seed": "EMU_FAULT_SEED",
    }
)
"""The fault flags, keyed by flag name (``delay_ms`` is ``--delay-ms``), and the environment
variable each falls back to when the flag is absent. Read by nicd and by emurun, in this order;
``fault_seed`` is :attr:`FaultConfig.seed`, the rest are the fields of the same name."""

_PROBABILITIES: Final = ("loss", "dup", "reorder", "corrupt")


_SEED_STRIDE: Final = 1 << 16  # node ids are 16 bits on the wire


def node_fault_seed(seed: int, node: int) -> int:
    """Node ``node``'s fault seed from a job's ``seed``: distinct per node, so nodes do not
    lose the same packets (emurun and a rank started by a PMI launcher derive it alike)."""
    return seed * _SEED_STRIDE + node


def fault_flag(name: str) -> str:
    """The command-line flag of :data:`FAULT_ENV` key ``name``: ``delay_ms`` -> ``--delay-ms``."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Seeded fault injection on outgoing datagrams (the kernel here has no netem).

    Construction checks the ranges and raises UsageError naming the flag.
    """

    loss: float = 0.0
    """Probability a datagram is dropped."""
    dup: float = 0.0
    """Probability a datagram is sent twice."""
    reorder: float = 0.0
    """Probability a datagram is held back so that later ones overtake it."""
    corrupt: float = 0.0
    """Probability one bit of a datagram is flipped."""
    delay_ms: float = 0.0
    """Extra one-way delay for every datagram, in milliseconds."""
    seed: int = 0
    """Seed of the fault plan's random generator: the same seed replays the same faults."""

    def __post_init__(self) -> None:
        for name in _PROBABILITIES:
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise UsageError(f"{fault_flag(name)} {p!r} is not a probability in [0, 1]")
        if not self.delay_ms >= 0.0:
            raise UsageError(f"--delay-ms {self.delay_ms!r} must not be negative")
        if self.seed < 0:
            raise UsageError(f"--fault-seed {self.seed!r} must not be negative")

    @property
    def active(self) -> bool:
        """True when any fault is injected."""
        return bool(self.loss or self.dup or self.reorder or self.corrupt or self.delay_ms)

    @classmethod
    def from_values(
        cls, given: Mapping[str, str | float | None], env: Mapping[str, str]
    ) -> FaultConfig:
        """Build from flag values keyed like :data:`FAULT_ENV` (None or missing: absent),
        falling back to ``EMU_LOSS`` ... in ``env`` (an empty variable is absent).

        A value that is not a number raises UsageError naming the flag or variable it came
        from; one out of range raises UsageError naming the flag.
        """
        values: dict[str, float] = {}
        seed = 0
        for name, var in FAULT_ENV.items():
            raw, origin = given.get(name), fault_flag(name)
            if raw is None:
                raw, origin = env.get(var) or None, var
            if raw is None:
                continue
            try:
                if name == "fault_seed":
                    seed = int(raw)
                else:
                    values[name] = float(raw)
            except ValueError:
                raise UsageError(f"{origin}={raw!r} is not a number") from None
        return cls(**values, seed=seed)

    def flags(self) -> list[str]:
        """The nicd command-line flags that give exactly this config, every one explicit (so
        that a variable left in nicd's environment cannot leak in)."""
        out: list[str] = []
        for name in FAULT_ENV:
            value = self.seed if name == "fault_seed" else getattr(self, name)
            out += [fault_flag(name), repr(value)]
        return out


@dataclass(frozen=True, slots=True)
class NicvmConfig:
    """NICVM tunables of one nicd."""

    enabled: bool = True
    """Off: NICVM packets are ordinary messages and NICVM records are refused (Fig 4.9's
    baseline)."""
    fuel: int = 10_000  # nicd.nicvm.limits.DEFAULT_FUEL
    """Instructions one invocation may execute."""
    pipelined: bool = False
    """Start all of a module's sends at once instead of one at a time (Fig 4.8)."""
    allow_remote_upload: bool = False
    """Accept ``NICVM_SOURCE`` packets from other nodes (refused by default, §4.2.5)."""
    max_hops: int = 64
    """Module sends a packet may go through: a module invoked on a packet that already made
    this many does not send (counted ``hop_limit``), so no module can bounce traffic between
    NICs forever. 64 covers a chain over the largest job; a tree needs log2(nodes)."""
    max_sends_outstanding: int = 1024
    """Module sends this NIC keeps in flight at once; an invocation whose sends do not fit is
    not sent (counted ``send_budget``, its packet still delivered per its result)."""


@dataclass(frozen=True, slots=True)
class CoalesceConfig:
    """Doorbell coalescing of host records (:mod:`nicd.core.doorbell`; ``nicd --host-coalesce-us``,
    0 turns it off)."""

    hold_s: float = 100e-6
    """How long the shell holds off once the host is streaming (0: never)."""
    gap_s: float = 50e-6
    """A record arriving this soon after nicd went back to waiting counts toward a streak."""
    streak: int = 8
    """Quick records in a row that make a stream (a 256-node binomial bcast's root sends 8)."""


@dataclass(frozen=True, slots=True)
class NicConfig:
    """Everything one nicd needs to start."""

    node_id: int
    """This NIC's node id in the job (the MPI rank of its host)."""
    run_dir: str
    """Directory of the job's socket files."""
    listen_host: str = "127.0.0.1"
    """Address the UDP link binds to."""
    listen_port: int = 0
    """UDP port; 0 picks a free one."""
    advertise_host: str | None = None
    """Address peers should send to, when it differs from ``listen_host`` (containers)."""
    routes_file: str | None = None
    """JSON routing table ``{node_id: [host, port]}``; without it, the launcher sends one."""
    max_ports: int = 16
    """GM ports (endpoints) per NIC."""
    max_nic_sends: int = 256
    """Messages the NIC sends on its own behalf (RM read and status replies, registry
    replies) in flight at once; more are refused (a read is answered BUSY)."""
    max_nic_send_bytes: int = 64 << 20
    """Payload bytes of those messages in flight at once."""
    send_tokens: int = 64
    """Send tokens a port gets at open: most outstanding sends per port."""
    max_message: int = 1 << 24
    """Largest message a port may send, in bytes."""
    reassembly_timeout_s: float = 30.0
    """A message being reassembled whose stream brings nothing for this long (its sender
    died or went silent mid-message) is aborted, counted ``reassembly_timeout``: its
    receive token goes back to the port and its sender is told (NACK ABORTED), so the
    sender's request fails ``aborted`` instead of ending SENT. A live sender resends at
    least every RTO (1 s at most), so only a gone or frozen one comes near this."""
    host_out_bytes: int = 64 << 20
    """Bytes of records nicd keeps queued for one host connection that does not read them
    (beyond what its socket buffer holds). Past this the connection is closed with a logged
    reason and a counted ``host_outq_full`` drop; at least ``max_message`` plus a little is
    always allowed, so one whole delivery fits."""
    host_records_per_wake: int = 64
    """Host records read from one connection per wake-up of the event loop: a host that
    floods its NIC waits its turn, and the link is served in between."""
    host_coalesce: CoalesceConfig = field(default_factory=CoalesceConfig)
    """When the shell holds off reading a streaming host's records (:mod:`nicd.core.doorbell`)."""
    sent_delay_s: float = 0.002
    """SENT events wait up to this long to be coalesced (or ride along with the next
    delivery to the same host, or go at once when half the port's send tokens are owed):
    a host blocked in a receive is not woken for each completion."""
    stats_file: str | None = None
    """Where to write the counters as JSON on exit."""
    mcast_forward_first: bool = False
    """Multicast: an internal NIC forwards a completing packet before delivering the message
    to its host (False: deliver first, as seed 001 §5.2 does)."""
    transport: TransportConfig = field(default_factory=TransportConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    nicvm: NicvmConfig = field(default_factory=NicvmConfig)
