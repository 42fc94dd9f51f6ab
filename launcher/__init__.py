"""emurun: the mpirun of the emulated cluster."""

from __future__ import annotations

__all__: list[str] = []
