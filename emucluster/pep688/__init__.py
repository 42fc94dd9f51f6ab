"""PEP 688's buffer export on Python 3.11: the base a class derives from so that
``memoryview(obj)`` calls its ``__buffer__``.

Python 3.12 gives any class with ``__buffer__(flags) -> memoryview`` the buffer protocol
(PEP 688); Python 3.11 asks only a type's C slot, so a Python class cannot export a buffer
there. `BufferExporter` is, on Python 3.11 where ``pip install .`` could compile it,
`emucluster.pep688._exporter.Exporter`: an empty C base type (``_exporter.c``) whose buffer
slot calls the instance's ``__buffer__`` and hands the consumer the returned memoryview's
buffer (the consumer's release goes to that memoryview; ``__release_buffer__`` is not called
and the view's ``obj`` is that memoryview, not the instance). Elsewhere it is an empty slotted
class: on 3.12 Python calls ``__buffer__`` itself; on 3.11 without the extension (a pure-Python
install, ``EMUCLUSTER_PURE=1``, no C compiler) a class has no buffer export. `EXPORTS` says
whether a ``__buffer__`` is honoured here. No maintained library offers this backport (searched:
package documentation, public code, the package index's names; the typing backports give only
the ``Buffer`` annotation, not the slot), hence the 70 lines of C.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

__all__ = ["BACKPORT", "EXPORTS", "BufferExporter"]


class _Plain:
    """A base adding nothing: Python 3.12 calls ``__buffer__`` itself (and 3.11 without the
    extension cannot)."""

    __slots__ = ()


BACKPORT = False
"""Whether `BufferExporter` is the C type of ``_exporter.c`` (Python 3.11, extension built)."""

if TYPE_CHECKING or sys.version_info >= (3, 12):
    BufferExporter = _Plain
else:
    try:
        from emucluster.pep688._exporter import Exporter as BufferExporter
    except ImportError:  # a pure-Python install
        BufferExporter = _Plain
    else:
        BACKPORT = True

EXPORTS = sys.version_info >= (3, 12) or BACKPORT
"""Whether ``memoryview(obj)`` of a `BufferExporter` subclass calls its ``__buffer__`` here."""
