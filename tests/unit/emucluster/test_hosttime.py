"""emucluster.hosttime: the run-delay reading, the charged library waits, and Region."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import pytest

from emucluster import hosttime

if TYPE_CHECKING:
    from pathlib import Path


def test_the_run_delay_is_the_second_schedstat_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "schedstat"
    fake.write_text("987654 4500000000 17\n")
    monkeypatch.setattr(hosttime, "SCHEDSTAT", str(fake))
    reader = hosttime._Schedstat()
    assert reader.run_delay_ns() == 4_500_000_000
    fake.write_text("987654 4600000000 18\n")  # the same descriptor reads the new figure
    assert reader.run_delay_ns() == 4_600_000_000


def test_without_schedstat_the_run_delay_is_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hosttime, "SCHEDSTAT", str(tmp_path / "missing"))
    reader = hosttime._Schedstat()
    assert reader.run_delay_ns() == 0
    assert reader.fd is None
    (tmp_path / "garbled").write_text("nothing useful")
    monkeypatch.setattr(hosttime, "SCHEDSTAT", str(tmp_path / "garbled"))
    assert hosttime._Schedstat().run_delay_ns() == 0


def test_a_forked_child_reads_its_own_schedstat(tmp_path: Path) -> None:
    """After a fork the child opens its own file (the parent's descriptor names the parent's
    thread): it reads its own run delay, not the parent's frozen one."""
    hosttime.run_delay()  # the parent's descriptor is open
    parent_fd = hosttime._SCHEDSTAT.fd
    assert parent_fd is not None
    out = tmp_path / "child"
    pid = os.fork()
    if pid == 0:  # the child: report what it reads through, then leave at once
        status = 1
        try:
            fresh = not hosttime._SCHEDSTAT.opened
            hosttime.run_delay()
            fd = hosttime._SCHEDSTAT.fd
            link = os.readlink(f"/proc/self/fd/{fd}") if fd is not None else ""
            out.write_text(f"{fresh} {link}")
            status = 0
        finally:
            os._exit(status)
    _, wstatus = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(wstatus) == 0
    fresh, link = out.read_text().split(" ", 1)
    assert fresh == "True"
    assert f"/{pid}/" in link  # the child's own thread, not the parent's
    assert hosttime._SCHEDSTAT.fd == parent_fd  # the parent's stays as it was


def test_a_library_wait_is_charged_and_a_program_sleep_is_not() -> None:
    with hosttime.Region() as slept:
        time.sleep(0.01)  # the program's own sleep
    assert slept.waited_s == 0.0
    assert slept.wall_s > 0.0
    with hosttime.Region() as waited:
        mark = hosttime.wait_mark()
        time.sleep(0.01)  # as the library sleeps in select waiting for its NIC
        hosttime.charge_wait(*mark)
    assert waited.waited_s > 0.0
    assert waited.cpu_s == waited.process_cpu_s + waited.waited_s
    assert waited.waited_s <= waited.wall_s  # never more than the time that passed


def test_spin_burns_this_process_cpu_and_waits_nothing() -> None:
    with hosttime.Region() as used:
        hosttime.spin(0.005)
    assert used.process_cpu_s > 0.0
    assert used.waited_s == 0.0
    assert 0.0 <= used.run_delay_s <= used.wall_s
    assert used.own_wall_s == used.wall_s - used.run_delay_s


def test_region_can_be_driven_by_hand_and_reused() -> None:
    region = hosttime.Region()
    with pytest.raises(RuntimeError, match="before start"):
        region.stop()
    first = region.start().stop()
    second = region.start().stop()
    assert first is not second  # each start begins afresh
    assert hosttime.now() <= time.monotonic()
