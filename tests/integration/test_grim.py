"""GRIM active messages, remote memory and logical channels through real emurun jobs."""

from __future__ import annotations

import pytest

from tests.integration.grim_test_helpers import run_grim

pytestmark = pytest.mark.slow


def _ok(result: object, records: list[dict[str, object]], n: int) -> None:
    assert getattr(result, "code", 1) == 0, result
    assert len(records) == n, result


def test_registry_same_name_same_id_everywhere_late_names_and_unknown_ids() -> None:
    result, records = run_grim(3, "registry.py")
    _ok(result, records, 3)
    ids = [r["ids"] for r in records]
    assert ids[0] == ids[1] == ids[2]
    assert len(set(ids[0].values())) == len(ids[0])  # type: ignore[union-attr]
    assert records[0]["consistent"] is True
    assert len({r["late"] for r in records}) == 1
    assert records[2]["got"] == ["late from 0", "late from 1", "late from 2"]
    assert records[1]["unknown"] == 2  # a made-up id and a name rank 1 never registered
    assert "no such handler" in str(records[1]["errors"])
    assert records[0]["unknown"] == records[2]["unknown"] == 0


@pytest.mark.parametrize("mode", ["poll", "thread"])
def test_reply_storm_with_two_send_tokens_overflows_to_the_host_and_completes(mode: str) -> None:
    result, records = run_grim(
        2, "storm.py", "300", "4", mode, emurun_args=("--nicd-args", "--send-tokens 2")
    )
    _ok(result, records, 2)
    for r in records:
        assert r["replies"] == 1200
        assert r["in_order"] is True
        overflow = r["overflow"]
        assert isinstance(overflow, dict)
        assert overflow["overflowed"] > 0
        assert overflow["drained"] == overflow["overflowed"]
        assert overflow["queued"] == 0


def test_rm_random_writes_and_reads_byte_for_byte_with_notify_and_cache_misses() -> None:
    result, records = run_grim(2, "rmcheck.py", "11", "250")
    _ok(result, records, 2)
    writer, target = records
    assert writer["full_ok"] is True
    assert writer["reads_ok"] == writer["reads"] > 0
    assert target["match"] is True
    assert target["notify_words"] == writer["expected_notify"]
    xlate = target["xlate"]
    assert isinstance(xlate, dict)
    assert xlate["misses"] > 0
    assert xlate["hits_dynamic"] > 0
    assert xlate["hits_static"] > 0
    assert xlate["evictions"] > 0  # 20 dynamic blocks, 16 dynamic entries
    assert target["upcalls"] == xlate["fills"] > 0


def test_a_host_computing_outside_the_library_answers_translation_upcalls() -> None:
    """Rank 1 never calls in while rank 0 writes into its dynamic block: the NIC's signal
    makes it answer the upcall (no polling thread). Then a wait on memory a plain write
    fills wakes from the NIC's report of the landed write (no re-check timer)."""
    result, records = run_grim(2, "computing.py")
    _ok(result, records, 2)
    writer, target = records
    assert writer["write"] == "ok"
    assert target["seen"] == 7
    assert target["signals"] is True
    assert target["upcalls"] == 1
    assert target["signal_drains"] > 0
    assert target["plain_wait"] == "ok"
    assert target["landed"] >= 2  # the armed marker and the write


def test_every_refused_address_is_an_error_and_writes_nothing() -> None:
    result, records = run_grim(2, "refused.py")
    _ok(result, records, 2)
    statuses = records[0]["statuses"]
    assert statuses == {
        "v_never_allocated": "no_translation",
        "v_freed_block": "no_translation",
        "v_past_end": "out_of_range",
        "v_in_padding": "no_translation",
        "v_past_end_dynamic": "out_of_range",
        "v_bad_notify": "bad_notify",
        "v_notify_past_end": "bad_notify",
        "p_no_segment": "no_region",
        "p_past_segment": "out_of_range",
        "p_bad_notify": "bad_notify",
        "rv_never_allocated": "no_translation",
        "rv_past_end": "out_of_range",
        "rv_freed_block": "no_translation",
        "local_past_handle": "out_of_range",
        "local_negative_offset": "out_of_range",
        "local_wrong_node": "wrong_node",
        "local_read_into_remote": "not_local",
        "rv_reply_unregistered": "bad_reply",
        "valid_after": "ok",
    }
    assert records[1]["unchanged"] == [True]


def test_ordering_rm_may_pass_am_nothing_else_reorders_alongside_mpi() -> None:
    result, records = run_grim(2, "ordering.py", "40")
    _ok(result, records, 2)
    r = records[1]
    assert r["rm_passed_am"] > 0  # RM after AM took effect before the AM's handler ran
    assert r["am_order"] is True
    assert r["rm_before_am"] is True
    assert r["rm_rm_monotonic"] is True
    assert r["final"] == 40


def test_logical_channels_isolated_under_loss() -> None:
    result, records = run_grim(
        2, "channels.py", "30", "300", emurun_args=("--loss", "0.1", "--fault-seed", "3")
    )
    _ok(result, records, 2)
    sender, receiver = records
    assert receiver["ch5_in_order"] is True
    assert receiver["ch4_in_order"] is True
    # Channel 5 finished while channel 4's stream was still refused and rolled back.
    assert sender["ch4_outstanding_when_ch5_done"] > 0
    nacks = sender["nacks_received"]
    assert isinstance(nacks, dict)
    assert nacks.get("no_buffer", 0) > 0
    assert nacks.get("gap", 0) > 0
    assert sender["dropped_by_faults"] > 0
