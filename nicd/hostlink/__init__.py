"""The host <-> nicd ("PCI") protocol: records and their codec."""

from __future__ import annotations

from nicd.hostlink.records import *  # noqa: F403
from nicd.hostlink.records import __all__ as __all__
