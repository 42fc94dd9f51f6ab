"""Per-packet traces: a recorder per process, merged into Chrome trace JSON (issue 18)."""

from __future__ import annotations

from emutrace.recorder import ENV_TRACE_DIR, Recorder, start_from_env

__all__ = ["ENV_TRACE_DIR", "Recorder", "start_from_env"]
