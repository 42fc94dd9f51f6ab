"""The link: wire format, the reliable transport and the fault plan (GRIM 4.2-4.3).

One room per part: :mod:`~nicd.link.wire` (bytes <-> records), :mod:`~nicd.link.channels` (the
transport: streams by key, the merged timer), :mod:`~nicd.link.sender` (one stream's sending
side) over :mod:`~nicd.link.scoreboard` (packets and window), :mod:`~nicd.link.recovery` (loss
recovery by name, with :mod:`~nicd.link.rack`), :mod:`~nicd.link.congestion` (AIMD) and
:mod:`~nicd.link.refusal` (paused / probing); :mod:`~nicd.link.reliable` (the receiving side,
with :mod:`~nicd.link.selective`'s hold buffer), :mod:`~nicd.link.liveness` (peers),
:mod:`~nicd.link.rto`, :mod:`~nicd.link.bundle` and :mod:`~nicd.link.faults`. All pure.
"""
