"""NicConfig: every tunable of one nicd, with its default and meaning."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FaultConfig", "NicConfig", "NicvmConfig", "TransportConfig"]


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
    dead_peer_timeout_s: float = 5.0
    """A peer that acknowledges nothing for this long while data is outstanding is dead."""
    dead_peer_min_retries: int = 4
    """... and only after at least this many timeouts in a row."""
    max_message: int = 1 << 24
    """Largest message a receiver reassembles, in bytes; a longer one is a counted drop."""


@dataclass(frozen=True, slots=True)
class FaultConfig:
    """Seeded fault injection on outgoing datagrams (the kernel here has no netem)."""

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

    @property
    def active(self) -> bool:
        """True when any fault is injected."""
        return bool(self.loss or self.dup or self.reorder or self.corrupt or self.delay_ms)


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
    send_tokens: int = 64
    """Send tokens a port gets at open: most outstanding sends per port."""
    max_message: int = 1 << 24
    """Largest message a port may send, in bytes."""
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
