"""nicd: the NIC firmware daemon of one emulated node (the MCP/LANai program)."""

from __future__ import annotations

__all__: list[str] = []
