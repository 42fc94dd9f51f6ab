"""How emurun starts its agents (``--launcher ssh|exec|none``; ``slurm`` is
`launcher.multihost.slurm`) and where they dial back.

``ssh``: ``ssh -x -o BatchMode=yes HOST 'AGENT --connect ME:PORT --token-file - ...'`` (one
shell-quoted word: ssh hands it to the remote shell). ``exec``: ``CMD HOST AGENT --connect
... --token-file - ...`` with the agent's words as separate arguments (any ssh-like command:
``docker exec -i``, a netns wrapper script, ...). ``none``: nothing is started; K agents
already running dial in. The token always travels on the launcher's stdin (``--token-file
-``), never on a command line (argv is visible to ps everywhere), as PRRTE passes its DVM key:
no copy step, and no shared filesystem is assumed.

Invariants: pure (argv lists only), except :func:`reach_address`, which asks the kernel's
routing table (no packet is sent).
"""

from __future__ import annotations

import shlex
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from launcher.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["AGENT_CMD", "LauncherKind", "Starter", "agent_words", "reach_address"]

LauncherKind = Literal["ssh", "exec", "none", "slurm"]
AGENT_CMD = ("emuproxy",)
"""The agent's command on the remote host (``--agent-cmd`` overrides it)."""
SSH = ("ssh", "-x", "-o", "BatchMode=yes")


def agent_words(
    agent_cmd: Sequence[str], connect: str, agent_id: int, name: str, quiet: bool
) -> list[str]:
    """The agent's command line (the token comes on stdin)."""
    words = [*agent_cmd, "--connect", connect, "--token-file", "-", "--agent-id", str(agent_id)]
    words += ["--name", name]
    return [*words, "-q"] if quiet else words


@dataclass(frozen=True, slots=True)
class Starter:
    """Builds the command that starts the agent of one host."""

    kind: LauncherKind
    exec_cmd: tuple[str, ...] = ()
    """``--launcher-exec`` split into words."""

    def argv(self, host: str, agent: Sequence[str]) -> list[str]:
        """The local command that runs ``agent`` (words) on ``host``."""
        if self.kind == "ssh":
            return [*SSH, host, shlex.join(agent)]
        if self.kind == "exec":
            if not self.exec_cmd:
                raise UsageError("--launcher exec needs --launcher-exec CMD")
            return [*self.exec_cmd, host, *agent]
        raise UsageError(f"--launcher {self.kind} starts no agent one host at a time")


def reach_address(host: str) -> str:
    """The local IPv4 address the kernel would use to reach ``host`` (UsageError if none)."""
    try:
        infos = socket.getaddrinfo(host, 9, socket.AF_INET, socket.SOCK_DGRAM)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(infos[0][4])
            return str(probe.getsockname()[0])
    except (OSError, IndexError) as exc:
        raise UsageError(f"cannot tell which local address reaches {host}: {exc}; "
                         "pass --listen ADDR:PORT") from None  # fmt: skip
