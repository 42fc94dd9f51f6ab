"""Hypothesis strategies for every host-link record class, one entry per class."""

from __future__ import annotations

from hypothesis import strategies as st

from nicd import hostlink as hl

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
args = st.tuples(u32, u32, u32, u32)
payloads = st.one_of(
    st.binary(max_size=300),
    st.integers(0, 3 * hl.CHUNK_BYTES + 7).map(lambda n: bytes(i % 251 for i in range(n))),
)
small_text = st.text(max_size=40)
nodes = st.lists(u16, max_size=20).map(tuple)
module_name = st.text(min_size=1, max_size=20)
delegated = st.binary(max_size=2000) | st.just(b"\x5a" * hl.NICVM_MAX_DELEGATE)
module_lists = st.none() | st.lists(
    st.dictionaries(st.text(max_size=8), u32 | st.text(max_size=8), max_size=3), max_size=3
)
i64 = st.integers(-(2**63), 2**63 - 1)

STRATEGIES: dict[type, st.SearchStrategy[hl.HostRecord]] = {
    # GM ports
    hl.OpenReq: st.builds(hl.OpenReq, u16),
    hl.SendReq: st.builds(hl.SendReq, u32, u16, u16, payloads, u8, u16, args),
    hl.ProvideReq: st.builds(hl.ProvideReq, u32),
    hl.CloseReq: st.just(hl.CloseReq()),
    hl.StatsReq: st.just(hl.StatsReq()),
    hl.RoutesOk: st.just(hl.RoutesOk()),
    hl.Opened: st.builds(hl.Opened, u16, u16, u16, u16),
    hl.RecvEvent: st.builds(hl.RecvEvent, u16, u16, payloads, u8, u16, args, u16),
    hl.SentEvent: st.builds(hl.SentEvent, u32),
    hl.SentBatch: st.builds(hl.SentBatch, st.lists(u32, max_size=300).map(tuple)),
    hl.ErrorEvent: st.builds(hl.ErrorEvent, u32, u16, small_text),
    hl.Refused: st.builds(hl.Refused, small_text),
    hl.SetRoutesReq: st.builds(
        hl.SetRoutesReq,
        st.dictionaries(u16, st.tuples(st.text(max_size=20), u16), max_size=8),
    ),
    hl.AddRoutesReq: st.builds(
        hl.AddRoutesReq,
        st.dictionaries(u16, st.tuples(st.text(max_size=20), u16), max_size=8),
    ),
    hl.StatsReply: st.builds(hl.StatsReply, st.dictionaries(st.text(max_size=10), u32, max_size=8)),
    hl.RegisterReq: st.builds(hl.RegisterReq, u16, u32, small_text),
    hl.DeregisterReq: st.builds(hl.DeregisterReq, u16),
    hl.SignalCtl: st.builds(hl.SignalCtl, st.booleans(), u32, u32),
    hl.Registered: st.builds(hl.Registered, u16),
    hl.RmWriteEvent: st.builds(hl.RmWriteEvent, u16, u16, u16, u32, u32, args),
    # GRIM remote memory
    hl.RmMapReq: st.builds(hl.RmMapReq, u32, u32, u16, u32),
    hl.RmUnmapReq: st.builds(hl.RmUnmapReq, u32),
    hl.RmXlateReq: st.builds(hl.RmXlateReq, u32, u32),
    hl.RmXlateReply: st.builds(hl.RmXlateReply, u32, u32, u32, u16, u32),
    hl.RmStatusEvent: st.builds(hl.RmStatusEvent, u32, u16),
    hl.RmUpcallSignals: st.builds(hl.RmUpcallSignals, st.booleans(), u32),
    hl.RmWatch: st.builds(hl.RmWatch, st.booleans()),
    hl.RmLanded: st.builds(hl.RmLanded),
    # NIC multicast
    hl.McastGroupReq: st.builds(
        hl.McastGroupReq, u16, u16, st.none() | st.integers(0, 0xFFFE), nodes, u16, st.booleans()
    ),
    hl.McastFreeReq: st.builds(hl.McastFreeReq, u16),
    hl.McastSendReq: st.builds(hl.McastSendReq, u32, u16, payloads, u16, args),
    hl.MultiSendReq: st.builds(hl.MultiSendReq, u32, nodes, u16, payloads, u8, u16, args),
    hl.McastGroupOk: st.builds(hl.McastGroupOk, u16),
    hl.McastErrorEvent: st.builds(hl.McastErrorEvent, u16, u16, small_text),
    # NICVM
    hl.NicvmLoadReq: st.builds(hl.NicvmLoadReq, small_text, st.text(max_size=200), st.booleans()),
    hl.NicvmPurgeReq: st.builds(hl.NicvmPurgeReq, small_text),
    hl.NicvmListReq: st.just(hl.NicvmListReq()),
    hl.NicvmCommReq: st.builds(
        hl.NicvmCommReq, i64, st.lists(u16, min_size=1, max_size=20).map(tuple)
    ),
    hl.NicvmDelegateReq: st.builds(
        hl.NicvmDelegateReq, u32, module_name, u16, u16, delegated, args
    ),
    hl.NicvmReply: st.builds(hl.NicvmReply, st.booleans(), small_text, u32, u32, module_lists),
    hl.NicvmDone: st.builds(hl.NicvmDone, u32, small_text, i64, small_text, u32),
    hl.NicvmReport: st.builds(hl.NicvmReport, small_text, small_text, small_text, u32),
}
"""Record class -> a strategy building its instances (the tests check it names every class)."""

records = st.one_of(*STRATEGIES.values())
"""Any host record."""
