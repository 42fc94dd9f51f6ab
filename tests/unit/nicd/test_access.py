"""Access rules of NicCore (issue 14): routes are set once, by the launcher, before any port
opens; a NICVM module is purged or replaced only by the port that loaded it."""

from __future__ import annotations

from nicd import hostlink as hl
from nicd.config import NicConfig
from nicd.core.actions import NicAction, ToHost
from nicd.core.nic import NicCore
from nicd.nicvm.modules import BCAST_BINARY_TREE, NOOP

LAUNCHER, HOST, INTRUDER = 1, 2, 3
ROUTES = {0: ("127.0.0.1", 1001), 1: ("127.0.0.1", 1002)}
ELSEWHERE = {0: ("127.0.0.1", 1001), 1: ("127.0.0.1", 6666)}


def _record(actions: list[NicAction]) -> hl.HostRecord:
    [action] = actions
    assert isinstance(action, ToHost)
    return action.record


def test_routes_are_set_once_and_never_after_a_port_opened() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    assert _record(core.on_host(LAUNCHER, hl.SetRoutesReq(ROUTES), now=0.0)) == hl.RoutesOk()
    again = _record(core.on_host(INTRUDER, hl.SetRoutesReq(ELSEWHERE), now=0.0))
    assert isinstance(again, hl.Refused)
    assert core.routes == ROUTES
    assert core.link.drops["routes_refused"] == 1


def test_routes_from_a_host_after_its_port_opened_are_refused() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    core.on_host(HOST, hl.OpenReq(0), now=0.0)
    refused = _record(core.on_host(HOST, hl.SetRoutesReq(ELSEWHERE), now=0.0))
    assert isinstance(refused, hl.Refused)
    assert core.routes == {}
    assert core.link.drops["routes_refused"] == 1


def test_a_routes_file_seals_the_table_too() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    core.set_routes(ROUTES)  # nicd --routes FILE, at start
    assert isinstance(_record(core.on_host(HOST, hl.SetRoutesReq(ELSEWHERE), now=0.0)),
                      hl.Refused)  # fmt: skip
    assert core.routes == ROUTES


def _two_ports() -> NicCore:
    core = NicCore(NicConfig(0, "/tmp"))
    core.set_routes(ROUTES)
    core.on_host(HOST, hl.OpenReq(0), now=0.0)
    core.on_host(INTRUDER, hl.OpenReq(1), now=0.0)
    reply = _record(core.on_host(HOST, hl.NicvmLoadReq("bc", BCAST_BINARY_TREE), now=0.0))
    assert isinstance(reply, hl.NicvmReply)
    assert reply.ok
    return core


def test_only_the_owning_port_purges_its_module() -> None:
    core = _two_ports()
    refused = _record(core.on_host(INTRUDER, hl.NicvmPurgeReq("bc"), now=0.0))
    assert isinstance(refused, hl.NicvmReply)
    assert not refused.ok
    assert core.nicvm is not None
    assert "bc" in core.nicvm.modules
    assert core.nicvm.counters["purge_refused"] == 1
    purged = _record(core.on_host(HOST, hl.NicvmPurgeReq("bc"), now=0.0))
    assert isinstance(purged, hl.NicvmReply)
    assert purged.ok
    assert "bc" not in core.nicvm.modules


def test_only_the_owning_port_replaces_its_module() -> None:
    core = _two_ports()
    assert core.nicvm is not None
    original = core.nicvm.modules["bc"].module
    refused = _record(core.on_host(INTRUDER, hl.NicvmLoadReq("bc", NOOP), now=0.0))
    assert isinstance(refused, hl.NicvmReply)
    assert not refused.ok
    assert core.nicvm.modules["bc"].module is original
    assert core.nicvm.counters["replace_refused"] == 1
    replaced = _record(core.on_host(HOST, hl.NicvmLoadReq("bc", NOOP), now=0.0))
    assert isinstance(replaced, hl.NicvmReply)
    assert replaced.ok
    assert core.nicvm.modules["bc"].module is not original


def test_a_persistent_module_whose_port_closed_is_anyones_to_purge() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    core.on_host(HOST, hl.OpenReq(0), now=0.0)
    core.on_host(HOST, hl.NicvmLoadReq("keep", NOOP, persist=True), now=0.0)
    core.on_disconnect(HOST, now=0.0)
    core.on_host(INTRUDER, hl.OpenReq(1), now=0.0)
    purged = _record(core.on_host(INTRUDER, hl.NicvmPurgeReq("keep"), now=0.0))
    assert isinstance(purged, hl.NicvmReply)
    assert purged.ok


def test_nodes_started_at_run_time_are_added_but_no_route_changes() -> None:
    core = NicCore(NicConfig(0, "/tmp"))
    refused = _record(core.on_host(LAUNCHER, hl.AddRoutesReq({2: ("127.0.0.1", 1003)}), now=0.0))
    assert isinstance(refused, hl.Refused)  # no table yet: nothing to extend
    core.on_host(LAUNCHER, hl.SetRoutesReq(ROUTES), now=0.0)
    core.on_host(HOST, hl.OpenReq(0), now=0.0)
    added = {2: ("127.0.0.1", 1003), 3: ("127.0.0.1", 1004)}
    assert _record(core.on_host(LAUNCHER, hl.AddRoutesReq(added), now=0.0)) == hl.RoutesOk()
    assert core.routes == {**ROUTES, **added}
    for bad in ({1: ("127.0.0.1", 6666)}, {4: ("127.0.0.1", 1001)},
                {5: ("127.0.0.1", 7), 6: ("127.0.0.1", 7)}):  # fmt: skip
        assert isinstance(_record(core.on_host(INTRUDER, hl.AddRoutesReq(bad), now=0.0)),
                          hl.Refused)  # fmt: skip
    assert core.routes == {**ROUTES, **added}
    assert core.link.drops["routes_refused"] == 4
    assert core.gm.nodes == frozenset({0, 1, 2, 3})
