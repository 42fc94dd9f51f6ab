"""nicd: the NIC firmware daemon of one emulated node (the MCP/LANai program).

Its rooms, from the bottom up. Every folder but ``shell/`` holds sans-IO cores only (no socket,
clock, thread or signal; ``tests/unit/test_purity.py`` checks each folder), so the path of a
module says which it is:

* ``errors.py``, ``config.py``: the exception tree and every tunable, which every room imports.
* ``link/``: the wire format and the reliable transport between NICs.
* ``hostlink/``: the records between a host and its NIC (the "PCI" protocol) and their codec.
* ``gm/``: GM ports: the port table and its tokens, the path a host's traffic takes when no
  feature claims it, and the watch over partly received messages.
* ``grim/``, ``mcast/``, ``nicvm/``: the features NicCore composes (remote memory and active
  messages, NIC-based multicast, the NIC virtual machine).
* ``core/``: NicCore, which composes the rooms into one NIC, and what it shares with them.
* ``shell/``: the process: the uvloop daemon and its OS helpers; the only code with I/O.
* ``__main__.py``: the command line (a shell too; it sits here because ``python -m nicd`` runs
  ``nicd/__main__.py``), which hands a NicConfig to :func:`nicd.shell.daemon.run`.
* ``contract.py``: everything a host library may take from nicd, in one module.
"""

from __future__ import annotations

__all__: list[str] = []
