"""What emurun says while a job starts (`launcher.startup`), on a virtual clock: the live
count's text and when it is due, when it is drawn at all, and the one line that a
non-terminal gets."""

from __future__ import annotations

import pytest

from launcher.startup import REFRESH_S, SHOW_AFTER_S, StartupCount, live_wanted, ready_line


def test_the_count_of_a_job_over_agents() -> None:
    count = StartupCount(nodes=16, agents=4, started=100.0)
    count.observe(connected=3, ready=10)
    assert count.text(102.4) == "starting: agents 3/4 connected, nodes 10/16 ready (2 s)"


def test_a_job_on_this_machine_counts_nodes_only() -> None:
    count = StartupCount(nodes=8, agents=0, started=0.0)
    count.observe(connected=1, ready=5)  # the local host is no agent
    assert count.text(1.0) == "starting: nodes 5/8 ready (1 s)"


def test_counts_are_clamped_to_their_totals() -> None:
    count = StartupCount(nodes=2, agents=1, started=0.0)
    count.observe(connected=5, ready=-1)
    assert (count.connected, count.ready) == (1, 0)


def test_a_quick_start_shows_nothing() -> None:
    count = StartupCount(nodes=4, agents=0, started=0.0)
    count.observe(0, 4)
    assert count.due(SHOW_AFTER_S / 2) is None
    assert not count.shown


def test_the_line_is_redrawn_when_something_changes_but_not_too_often() -> None:
    count = StartupCount(nodes=4, agents=2, started=0.0)
    assert count.due(SHOW_AFTER_S) == "starting: agents 0/2 connected, nodes 0/4 ready (0 s)"
    assert count.shown
    count.observe(1, 0)
    assert count.due(SHOW_AFTER_S + REFRESH_S / 2) is None  # too soon
    assert count.due(2.0) == "starting: agents 1/2 connected, nodes 0/4 ready (2 s)"
    assert count.due(2.5) is None  # nothing changed, not even the second shown
    count.observe(1, 3)
    assert (
        count.due(2.0 + 1.5 * REFRESH_S) == "starting: agents 1/2 connected, nodes 3/4 ready (2 s)"
    )
    assert count.due(3.0) == "starting: agents 1/2 connected, nodes 3/4 ready (3 s)"


@pytest.mark.parametrize(
    ("tty", "quiet", "term", "wanted"),
    [
        (True, False, "xterm-256color", True),
        (False, False, "xterm", False),  # a pipe, a batch job's output file: the summary only
        (True, True, "xterm", False),  # -q
        (True, False, "dumb", False),
        (True, False, None, False),
    ],
)
def test_the_live_count_only_on_a_terminal(
    tty: bool, quiet: bool, term: str | None, wanted: bool
) -> None:
    assert live_wanted(tty, quiet, term) is wanted


def test_the_summary_line() -> None:
    line = ready_line("3fa2c1d0", 16, " on 2 hosts (n1=10.0.0.1:8, n2=10.0.0.2:8)",
                      "nicd at SCHED_FIFO 10; bind-to role; profile faithful", 3.14159)  # fmt: skip
    assert line == (
        "job 3fa2c1d0: 16 nodes ready on 2 hosts (n1=10.0.0.1:8, n2=10.0.0.2:8); "
        "nicd at SCHED_FIFO 10; bind-to role; profile faithful; started in 3.1 s"
    )
