"""No silent loss with real processes (issue 30): rank 0's nicd is frozen (SIGSTOP) in the
middle of a large message for longer than the receiver's reassembly timeout. Before, the
receiver dropped the partial message and took the rest of it quietly, so the sender reported
it SENT and rank 1 waited for ever; now the receiver aborts it (NACK ABORTED) and the sender's
request ends in an error naming node 1, and the stream goes on.

The message crawls (``--delay-ms`` on every datagram: ~100 ms round trips, a window per round
trip) so the freeze lands in its middle; the reassembly timeout is shortened to keep the test
short. Every wait has a generous timeout; nothing asserts a duration.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

from emucluster.mpi.errors import ERR_PROC_FAILED
from tests.integration.test_chaos import GENTLE

if TYPE_CHECKING:
    from tests.integration.test_emurun import Job

FREEZE_HOST = str(Path(__file__).parent / "hosts" / "freeze_host.py")
FREEZE_SEND = str(Path(__file__).parent / "mpi_programs" / "freeze_send.py")
SIZE = 8 << 20  # 2048 packets of 4 KiB: seconds at ~100 ms per window of 64
FREEZE_AFTER_S = 1.0
REASSEMBLY_TIMEOUT_S = 1.0
FREEZE_S = 4.0
JOB_WAIT_S = 300.0

pytestmark = pytest.mark.slow


def test_a_nicd_frozen_mid_message_past_the_reassembly_timeout_makes_the_send_fail(
    job: Job,
    tmp_path: Path,
) -> None:
    stats = tmp_path / "stats"
    code, text, errors = freeze_mid_message(job, stats, FREEZE_HOST)
    assert code == 0, errors + text
    lines = set(text.splitlines())
    assert "outcome error 1 aborted" in lines, text  # never SENT, and it names node 1
    assert "outcome sent" not in lines, text
    assert not any(line.startswith("got big") for line in lines), text
    assert "got after" in lines, text  # the stream went on
    receiver = json.loads((stats / "nic1.json").read_text())
    sender = json.loads((stats / "nic0.json").read_text())
    assert receiver["link"]["drops"]["reassembly_timeout"] == 1, receiver["link"]
    assert receiver["transport"]["nacks_sent"]["aborted"] >= 1, receiver["transport"]
    assert sender["transport"]["messages_failed"] == {"aborted": 1}, sender["transport"]
    assert sender["link"]["peers_dead"] == [], sender["link"]
    job.assert_clean()


def test_an_mpi_send_whose_message_was_aborted_raises_naming_the_peer(
    job: Job,
    tmp_path: Path,
) -> None:
    """The same freeze under MPI: rank 0's rendezvous ``Send`` completes only once its chunks
    are SENT, so the aborted chunk makes the Send itself raise MPI_ERR_PROC_FAILED naming
    node 1 (before: it returned once the CTS came, and rank 1 waited for ever). Rank 1 never
    completes its receive with other bytes than those sent; the job ends with rank 0's code."""
    stats = tmp_path / "stats"
    code, text, errors = freeze_mid_message(job, stats, FREEZE_SEND)
    lines = text.splitlines()
    failed = [line for line in lines if line.startswith("send failed ")]
    assert failed, errors + text
    assert failed[0].startswith(f"send failed {ERR_PROC_FAILED} "), failed
    assert "node 1" in failed[0], failed
    assert "aborted" in failed[0], failed
    assert "send ok" not in lines, text
    assert f"got big {SIZE} False" not in lines, text  # no corrupted data, ever
    assert code == 3, errors + text  # rank 0's exit ended the job
    receiver = json.loads((stats / "nic1.json").read_text())
    assert receiver["link"]["drops"]["reassembly_timeout"] >= 1, receiver["link"]
    job.assert_clean()


def freeze_mid_message(running: Job, stats: Path, program: str) -> tuple[int, str, str]:
    """Run ``program`` on 2 crawling nodes, freezing nicd 0 for `FREEZE_S`, `FREEZE_AFTER_S`
    after rank 0 said ``sending``; emurun's exit code, stdout and stderr."""
    running.start(
        "-np", "2", "--stats", str(stats), "--delay-ms", "50", *GENTLE,
        "--nicd-args", f"--reassembly-timeout-s {REASSEMBLY_TIMEOUT_S}",
        program, str(SIZE),
    )  # fmt: skip
    running._read_until(lambda: "sending" in running._out.decode(), "'sending'")
    time.sleep(FREEZE_AFTER_S)
    nicd = psutil.Process(running.nicd_pid(0))
    nicd.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + JOB_WAIT_S
        while nicd.status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline, "nicd 0 never stopped"
            time.sleep(0.05)
        time.sleep(FREEZE_S)
    finally:
        nicd.send_signal(signal.SIGCONT)
    assert running.proc is not None
    out, err = running.proc.communicate(timeout=JOB_WAIT_S)
    return (running.proc.returncode, (running._out + out).decode(),
            (running._err + err).decode())  # fmt: skip
