"""A job on several machines, emurun's side: which hosts and ranks (``--host``, ``--hostfile``,
``--map-by``), how their agents are started (``--launcher ssh|exec|none``), the TCP control
connection and its token handshake, and the gate that admits the agents into the job.

* `hostfile`: hostfiles and ``--host`` lists; ranks mapped onto hosts (pure).
* `starters`: the command line that starts one agent, and the address it dials back (pure
  but for one routing-table lookup).
* `channel`: one control connection over a trio stream (framed messages, the handshake);
  both ends use it, emurun here and the agent in `launcher.agent.session`.
* `gate`: `AgentGate`, the `launcher.hosts.Gate` of a multi-host job: start or await the
  agents, admit each after the handshake, carry the job's messages, watch the heartbeat.

Not here, though they serve several hosts too: the control messages (`launcher.control`),
which a one-machine job exchanges with its in-process host as plain objects; and the agent
itself (`launcher.agent`, ``emuproxy`` / ``python -m launcher.agent``), a program of its own
whose node runner (`launcher.agent.nodes.LocalNodes`) is also the host of every one-machine
job. This ``__init__`` imports none of its modules.
"""

from __future__ import annotations

__all__: list[str] = []
