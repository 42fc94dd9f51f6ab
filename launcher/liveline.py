"""The live line at the bottom of emurun's stderr on a terminal (rich): the start-up count of
`launcher.startup`, with the lines emurun prints meanwhile written above it.

Invariants: used only when stderr is a terminal (`launcher.startup.live_wanted`); rich is
loaded on first use; the line is transient (gone once closed) and redrawn only when told
(no refresh thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.live import Live

__all__ = ["LiveLine"]


class LiveLine:
    """One redrawable line on stderr."""

    def __init__(self) -> None:
        # late: rich costs emurun ~50 ms at start, paid only on a terminal and a slow start
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        self._text = Text
        console = Console(stderr=True, highlight=False, markup=False)
        self._live: Live | None = Live(
            "", console=console, auto_refresh=False, transient=True,
            redirect_stdout=False, redirect_stderr=False,
        )  # fmt: skip
        self._live.start()

    def show(self, text: str) -> None:
        """Draw ``text`` as the line."""
        if self._live is not None:
            self._live.update(self._text(text, style="bold"), refresh=True)

    def print(self, data: bytes) -> None:
        """Write whole lines above the live line."""
        if self._live is not None:
            self._live.console.out(data.decode(errors="replace"), end="", highlight=False)

    def close(self) -> None:
        """Erase the line and give the terminal back."""
        if self._live is not None:
            self._live.stop()
            self._live = None
