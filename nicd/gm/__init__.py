"""GM on the NIC: ports, their send and receive tokens, and the path a host's traffic takes.

A port is a GM endpoint and a GRIM logical channel at once (GRIM 4.3.1). Sans-IO, like every
folder of nicd but ``shell/``.

* ``ports.py``: the port table: which host connection owns which port, its tokens, its
  registered memory.
* ``service.py``: the port path NicCore falls back on when no feature claims the traffic:
  opening ports, the checks on host sends, plain delivery, SENT and ERROR events for the host
  (a send's SENT queued and batched).
* ``reassembly.py``: the watch over partly received messages, so none holds a receive token
  for ever.
"""

from __future__ import annotations

__all__: list[str] = []
