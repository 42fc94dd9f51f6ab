"""Processes started at run time and intercommunicators between groups with no common
communicator: ``Spawn``/``Spawn_multiple``, ``Get_parent``, ports (``Open_port``, ``Accept``,
``Connect``), ``Join`` and the name service (docs/dev/architecture.md lists the modules).
"""
