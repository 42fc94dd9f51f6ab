"""The global active-message handler registry (GRIM 4.4.1, Fig 4.11): names -> cluster-wide
integer ids, served by one NIC of the job.

Requests and replies travel as AM_DATA messages to and from the registry NIC's
``NIC_PORT``; their payload is msgpack ``{"op": "sync" | "lookup", "req": id, "names": [..]}``
and the reply ``{"req": id, "table": {name: id, ...}}``. ``sync`` publishes names (assigning
ids to new ones) and answers with the whole table; ``lookup`` assigns nothing and answers with
the whole table too (a name not in it is not registered anywhere yet).

Invariants: an id, once given to a name, never changes and is never given to another name;
ids are 1..65535 in order of first publication (0 means "no handler" on the wire). The reply
carrying the whole table never exceeds ``max_reply`` bytes (the NIC's largest message): a
name that would push it past, or one longer than ``MAX_NAME_BYTES``, is refused (left out of
the table, so its publisher sees it missing) and counted; nothing is ever truncated, and a
name flood ends at that bound.
"""

from __future__ import annotations

import msgpack

from nicd.errors import BadPacket

__all__ = ["MAX_HANDLER_ID", "MAX_NAME_BYTES", "Registry", "decode_reply", "decode_request",
           "encode_reply", "encode_request", "reply_size_bound"]  # fmt: skip

MAX_HANDLER_ID = 0xFFFF  # the 16-bit handler field of the data header
MAX_NAME_BYTES = 255  # a handler name, UTF-8
_REPLY_FRAME = 21  # {"req": uint32, "table": map32}: everything of a reply but its entries
_ENTRY_ID = 3  # a uint16 id, as msgpack packs it at most


def _entry_size(name: str) -> int:
    """Bytes one ``name: id`` entry takes in a reply, at most."""
    n = len(name.encode("utf-8", "surrogatepass"))
    header = 1 if n < 32 else 2 if n < 256 else 3 if n < 65536 else 5
    return header + n + _ENTRY_ID


def reply_size_bound(table: dict[str, int]) -> int:
    """An upper bound of ``len(encode_reply(req, table))`` for any ``req``."""
    return _REPLY_FRAME + sum(_entry_size(name) for name in table)


class Registry:
    """Name -> id assignments of one job; its whole-table reply fits in ``max_reply`` bytes."""

    def __init__(self, max_reply: int = 1 << 24) -> None:
        self._ids: dict[str, int] = {}
        self.max_reply = max_reply
        self._reply_bytes = _REPLY_FRAME  # reply_size_bound(self._ids), kept as names come
        self.syncs = 0
        self.lookups = 0
        self.refused_long = 0
        """Names refused for being longer than ``MAX_NAME_BYTES``."""
        self.refused_full = 0
        """Names refused because the id space or the reply size is exhausted."""

    def publish(self, names: list[str]) -> dict[str, int]:
        """Assign ids to the names not yet known; return the whole table. A name that is too
        long, or past the 16-bit id space, or that would make the reply exceed
        ``max_reply``, is left out and counted (the caller sees it missing)."""
        self.syncs += 1
        for name in names:
            if name in self._ids:
                continue
            if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
                self.refused_long += 1
                continue
            cost = _entry_size(name)
            if len(self._ids) >= MAX_HANDLER_ID or self._reply_bytes + cost > self.max_reply:
                self.refused_full += 1
                continue
            self._ids[name] = len(self._ids) + 1
            self._reply_bytes += cost
        return dict(self._ids)

    def table(self) -> dict[str, int]:
        """The whole table (a lookup)."""
        self.lookups += 1
        return dict(self._ids)

    def on_request(self, payload: bytes) -> bytes:
        """Serve one request payload; raise BadPacket if it is malformed."""
        op, req, names = decode_request(payload)
        table = self.publish(names) if op == "sync" else self.table()
        return encode_reply(req, table)

    def stats(self) -> dict[str, int]:
        """Counters, JSON-able."""
        return {"handlers": len(self._ids), "syncs": self.syncs, "lookups": self.lookups,
                "reply_bytes": self._reply_bytes, "refused_long": self.refused_long,
                "refused_full": self.refused_full}  # fmt: skip


def encode_request(op: str, req: int, names: list[str]) -> bytes:
    """A ``sync`` or ``lookup`` request."""
    packed: bytes = msgpack.packb({"op": op, "req": req, "names": names}, use_bin_type=True)
    return packed


def decode_request(payload: bytes) -> tuple[str, int, list[str]]:
    """``(op, req, names)``; BadPacket if malformed."""
    try:
        obj = msgpack.unpackb(payload, raw=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise BadPacket("registry_request", str(exc)) from None
    if not isinstance(obj, dict):
        raise BadPacket("registry_request", "not a map")
    op, req, names = obj.get("op"), obj.get("req"), obj.get("names")
    if op not in ("sync", "lookup") or not isinstance(req, int) or not isinstance(names, list):
        raise BadPacket("registry_request", "bad fields")
    if not all(isinstance(n, str) for n in names):
        raise BadPacket("registry_request", "names must be strings")
    return op, req, names


def encode_reply(req: int, table: dict[str, int]) -> bytes:
    """The reply to request ``req``."""
    packed: bytes = msgpack.packb({"req": req, "table": table}, use_bin_type=True)
    return packed


def decode_reply(payload: bytes) -> tuple[int, dict[str, int]]:
    """``(req, table)``; BadPacket if malformed."""
    try:
        obj = msgpack.unpackb(payload, raw=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise BadPacket("registry_reply", str(exc)) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("req"), int):
        raise BadPacket("registry_reply", "bad fields")
    table = obj.get("table")
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, int) for k, v in table.items()
    ):
        raise BadPacket("registry_reply", "bad table")
    return obj["req"], table
