"""Chaos with real processes: 8 nodes under emurun, all-pairs traffic at 20 % loss with
duplication and reordering, while one host is frozen (SIGSTOP for 10 s: the job completes,
nobody calls its node dead) or one nicd is killed (the job ends with an error naming it).

Kept light for CI on two cores: a dozen small messages per pair, hosts that block instead of
spinning, no CPU binding or real-time priority. Every wait has a generous timeout; no test
asserts a duration (the kill test reports how long detection took).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

import psutil  # type: ignore[import-untyped,unused-ignore]
import pytest

from launcher.errors import EXIT_INTERNAL

if TYPE_CHECKING:
    from tests.integration.test_emurun import Job

CHAOS_HOST = str(Path(__file__).parent / "hosts" / "chaos_host.py")
NODES = 8
ROUNDS = 12  # 8 x 7 x 12 = 672 messages of 1 B .. 4 KiB
STOPPED_RANK = 3
STOP_S = 10.0
KILLED_NODE = 5
JOB_WAIT_S = 400.0
FAULTS = ("--loss", "0.2", "--dup", "0.05", "--reorder", "0.05", "--fault-seed", "3")
GENTLE = ("--bind-to", "none", "--nic-priority", "none", "-x", "EMU_WAIT=block")

pytestmark = pytest.mark.slow


def finish(job: Job) -> tuple[int, str, str]:
    assert job.proc is not None
    out, err = job.proc.communicate(timeout=JOB_WAIT_S)
    job_out = (job._out + out).decode()
    job_err = (job._err + err).decode()
    return job.proc.returncode, job_out, job_err


def results(out: str) -> dict[int, dict[str, object]]:
    found = {}
    for line in out.splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            found[doc["rank"]] = doc
    return found


def test_a_host_frozen_for_10_s_under_loss_dup_reorder_does_not_fail_the_job(
    job: Job, tmp_path: Path
) -> None:
    stats = tmp_path / "stats"
    job.start(
        "-np", str(NODES), "--stats", str(stats), *FAULTS, *GENTLE,
        CHAOS_HOST, str(ROUNDS), str(STOPPED_RANK),
    )  # fmt: skip
    marker = f"stopping {STOPPED_RANK} "
    job._read_until(lambda: marker in job._out.decode(), repr(marker))
    pid = int(job._out.decode().split(marker)[1].split()[0])
    host = psutil.Process(pid)
    deadline = time.monotonic() + JOB_WAIT_S
    while host.status() != psutil.STATUS_STOPPED:
        assert time.monotonic() < deadline, "the host never stopped"
        time.sleep(0.05)
    time.sleep(STOP_S)  # frozen: its port takes nothing, its nicd refuses and answers probes
    host.send_signal(signal.SIGCONT)

    code, out, err = finish(job)
    assert code == 0, err + out
    done = results(out)
    assert sorted(done) == list(range(NODES)), out
    for rank, doc in done.items():
        assert doc["errors"] == [], (rank, doc)
        assert doc["received"] == (NODES - 1) * ROUNDS, (rank, doc)
    nics = [json.loads((stats / f"nic{n}.json").read_text()) for n in range(NODES)]
    assert [n["link"]["peers_dead"] for n in nics] == [[]] * NODES
    refusals = {n: nic["transport"].get("nacks_sent", {}) for n, nic in enumerate(nics)}
    print(f"NACKs sent per node while rank {STOPPED_RANK} was frozen: {refusals}")
    assert sum(n["faults"]["dropped"] for n in nics) > 0
    assert sum(n["faults"]["duplicated"] for n in nics) > 0
    job.assert_clean()


def test_a_killed_nicd_ends_the_job_with_an_error_naming_its_node(job: Job) -> None:
    job.start("-np", str(NODES), *FAULTS, *GENTLE, CHAOS_HOST, "-1", "-1")
    job.wait_ready(NODES)
    victim = job.nicd_pid(KILLED_NODE)
    psutil.Process(victim).kill()
    killed_at = time.monotonic()
    blame = f"nicd of node {KILLED_NODE} (pid {victim}) was killed by SIGKILL"
    job.wait_stderr(blame)
    detected_s = time.monotonic() - killed_at
    code, _, err = finish(job)
    print(f"kill -> emurun's error line: {detected_s:.2f} s (as read by the test)")
    assert code == EXIT_INTERNAL, err
    first = next(line for line in err.splitlines() if line.startswith("emurun: nicd"))
    assert first == f"emurun: {blame}; stopping the job", err
    job.assert_clean()
