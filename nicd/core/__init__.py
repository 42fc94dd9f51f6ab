"""The NIC core: :class:`~nicd.core.nic.NicCore` composes the rooms into one NIC's firmware.

Sans-IO like every folder of nicd but ``shell/``: each input takes ``now`` and returns action
records; nothing here opens a socket, reads a clock or starts a thread (the purity test checks
every module of this folder). Called ``core`` because NicCore lives here; the feature rooms
beside it (``link/``, ``gm/``, ``grim/``, ``mcast/``, ``nicvm/``, ``hostlink/``) are cores too.

* ``nic.py``: NicCore, the composer: inputs, dispatch to the services, the one action loop.
* ``service.py``: :class:`~nicd.core.service.NicService`, the protocol a feature implements.
* ``actions.py``: the records every core returns and NicCore carries out or hands the shell.
* ``stats.py``: the counters of the link, the host bus and the transport.
* ``routes.py``: the routing table and the rule that only the launcher sets it, once.
* ``doorbell.py``: when the shell holds off reading a streaming host.
* ``ready.py``: the start-up handshake's codec (the ready line the daemon prints and
  launchers read, the routes file), kept pure so launchers can use it.
"""

from __future__ import annotations

__all__: list[str] = []
