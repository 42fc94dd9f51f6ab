"""The paper offloads, one room each, the sans-IO core beside its shell.

* ``app_bypass/``: application-bypass reduce (thesis ch. 3): ``core.py`` + ``shell.py``.
* ``nic_mcast/``: NIC-based multicast broadcast (seed 001): ``bcast.py``, ``trees.py``,
  ``shell.py``.
* ``nicvm/``: NICVM binary-tree broadcast (thesis ch. 4): ``bcast.py`` + ``shell.py``.
"""
