"""Transitional: the lifeline lives in :mod:`nicd.shell.lifeline`; hosts take its ``watch``
from :mod:`nicd.contract` as ``watch_lifeline``.

``emucluster/port.py`` still imports ``from nicd import lifeline`` until it switches to the
contract; this module goes in the same change.
"""

from __future__ import annotations

from nicd.shell.lifeline import watch

__all__ = ["watch"]
