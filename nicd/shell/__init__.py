"""The shell: the process around the cores, and the only code of nicd that does I/O.

Sockets, the clock, signals, threads and files live here, under a name that says so; every
other folder of nicd is sans-IO (the purity test checks them folder by folder), and
``nicd/__main__.py`` (the command line) hands over to :func:`~nicd.shell.daemon.run`.

* ``daemon.py``: the nicd process around the uvloop event loop: its UDP and PCI sockets,
  signals, start and stop.
* ``shell.py``: the loop's callbacks (compiled): every input goes to NicCore with ``now``
  and what comes back is carried out (the link, the host connections, the one timer).
* ``hostconn.py``: one host connection's socket state (its queue, the descriptors that came
  with its records, its peer's pid).
* ``routes.py``: routing tables read from a file and resolved to addresses.
* ``memfd.py``: mapping the sealed memory a host registers.
* ``lifeline.py``: a process started by a launcher stops when the launcher dies (nicd, the
  hosts and the launchers share it).
* ``manage.py``: the blocking client a launcher uses to set a nicd's routes and read its
  counters.
"""

from __future__ import annotations

__all__: list[str] = []
