"""``emubench core``: two NIC cores exchange messages as nicds would, and the count holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from emubench.common import read_json
from emubench.core_cost import CorePair, count_calls, main, pingpong, stream

if TYPE_CHECKING:
    from pathlib import Path


def test_pingpong_delivers_every_message_once_and_the_acks_ride_on_replies() -> None:
    pair = CorePair()
    pingpong(pair, 200)
    assert pair.delivered == [100, 100]
    link = [core.stats()["transport"] for core in pair.cores]
    assert all(t["acks_piggybacked"] > 0 for t in link)  # type: ignore[index]


def test_stream_completes_every_send() -> None:
    pair = CorePair()
    stream(pair, 100, burst=32)
    assert pair.delivered == [0, 100]
    assert not pair.wire
    sent = pair.cores[0].ports.port_of(1)
    assert sent is not None
    assert sent.sends_outstanding == 0  # every ACK came back


def test_count_calls_counts_python_and_c_calls() -> None:
    def two_calls() -> None:
        len(str(1))

    assert count_calls(two_calls) >= 2


def test_quick_run_writes_both_modes(tmp_path: Path) -> None:
    out = tmp_path / "core.json"
    assert main(["--quick", "--out", str(out)]) == 0
    modes = read_json(out)["modes"]
    assert set(modes) == {"pingpong", "stream"}
    for record in modes.values():
        assert record["us_per_message"] > 0
        # a message is not free: the harness alone makes 16 calls per message, the cores a few
        # more compiled (18.9 in a stream), hundreds interpreted
        assert record["calls_per_message"] > 16
