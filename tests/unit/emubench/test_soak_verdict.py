"""The soak's verdict (emubench/soak.py) on hand-made books: what counts as a violation."""

from __future__ import annotations

from typing import Any

from emubench.soak import verdict


def books(n: int, sent: int) -> dict[int, dict[str, Any]]:
    return {
        node: {
            "node": node,
            "phase": "done",
            "sent": {str(d): sent for d in range(n) if d != node},
            "failed": {},
            "received": {str(s): sent for s in range(n) if s != node},
            "outstanding": 0,
            "violations": [],
        }
        for node in range(n)
    }


def test_everything_delivered_is_clean() -> None:
    report = verdict(books(3, 10), None)
    assert report["violations"] == []
    assert report["messages_sent"] == report["messages_delivered"] == 60


def test_a_sent_message_missing_at_a_live_receiver_is_a_silent_loss() -> None:
    b = books(3, 10)
    b[2]["received"]["0"] = 9
    report = verdict(b, None)
    assert report["silent_losses"] == ["0->2: 10 SENT, 9 delivered"]
    assert report["violations"] == report["silent_losses"]


def test_errors_between_live_nodes_and_outstanding_sends_are_violations() -> None:
    b = books(3, 10)
    b[0]["failed"]["1"] = [[10, "peer_dead"]]
    b[1]["outstanding"] = 2
    report = verdict(b, None)
    assert len(report["violations"]) == 2
    assert report["failures_by_reason"] == {"peer_dead": 1}


def test_the_killed_node_may_lose_what_it_held_but_its_peers_must_see_errors() -> None:
    b = books(3, 10)
    b[2].update(phase="lost_nic", outstanding=5)
    b[2]["received"] = {"0": 4, "1": 7}  # SENT to a NIC that then died: allowed
    b[0]["received"]["2"] = 3
    b[0]["failed"]["2"] = [[10, "peer_dead"]]
    report = verdict(b, 2)
    assert report["violations"] == ["1->2: no send to the killed node failed"]
    b[1]["failed"]["2"] = [[10, "peer_dead"]]
    assert verdict(b, 2)["violations"] == []
