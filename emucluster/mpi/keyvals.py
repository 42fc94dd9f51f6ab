"""Attribute caching (MPI-3.1 §6.7): keyvals and the values objects hold under them.

MPI keeps a separate keyval space per object kind (``MPI_Comm_create_keyval``,
``MPI_Type_create_keyval``), so each kind gets its own `Keyvals` registry. A keyval carries a
copy callback, run when the object is duplicated (None or False: the value is not copied; True:
copied as is; a callable ``copy_fn(obj, keyval, value)`` returns the copy, or NotImplemented
for none), and a delete callback ``delete_fn(obj, keyval, value)``, run when a value is
replaced, deleted or its object freed. A callback that raises becomes ``MPI.Exception``
(ERR_OTHER) after its traceback is printed to stderr, as mpi4py does with MPICH 4.2.
"""

from __future__ import annotations

import itertools
import sys
import traceback
from collections.abc import Callable
from typing import Any

from emucluster.mpi.errors import ERR_KEYVAL, ERR_OTHER
from emucluster.mpi.errors import Exception as MPIException

__all__ = ["Callback", "Keyvals"]

Callback = Callable[..., Any] | bool | None
"""A copy or delete callback; for copy, True/False mean copy as is / never (mpi4py)."""
Attrs = dict[int, Any]


class Keyvals:
    """The keyvals of one object kind, and the operations on an object's attribute dict."""

    def __init__(self, kind: str, first: int) -> None:
        self.kind = kind
        """``Comm`` or ``Datatype``: names the calls in error messages."""
        self._callbacks: dict[int, tuple[Callback, Callback]] = {}
        self._freed: dict[int, tuple[Callback, Callback]] = {}
        """Freed keyvals whose values may still be attached: their callbacks still run."""
        self._next = itertools.count(first)

    def create(self, copy_fn: Callback, delete_fn: Callback) -> int:
        """A new keyval."""
        keyval = next(self._next)
        self._callbacks[keyval] = (copy_fn, delete_fn)
        return keyval

    def free(self, keyval: int) -> None:
        """Retire ``keyval``: no new use, but values still attached are copied and deleted
        by its callbacks (MPI-3.1 §6.7.2: the free takes effect when no object holds it)."""
        callbacks = self._callbacks.pop(keyval, None)
        if callbacks is None:
            raise MPIException(ERR_KEYVAL, f"{self.kind}.Free_keyval of unknown keyval {keyval}")
        self._freed[keyval] = callbacks

    def _callbacks_of(self, keyval: int) -> tuple[Callback, Callback]:
        return self._callbacks.get(keyval) or self._freed.get(keyval) or (None, None)

    def _known(self, keyval: int, call: str) -> tuple[Callback, Callback]:
        callbacks = self._callbacks.get(keyval)
        if callbacks is None:
            raise MPIException(ERR_KEYVAL, f"{self.kind}.{call} of unknown keyval {keyval}")
        return callbacks

    def get(self, attrs: Attrs, keyval: int) -> Any:
        """The value under ``keyval``, None if there is none."""
        self._known(keyval, "Get_attr")
        return attrs.get(keyval)

    def set(self, obj: object, attrs: Attrs, keyval: int, value: Any) -> None:
        """Attach ``value`` (a previous value is deleted first, its callback run)."""
        self._known(keyval, "Set_attr")
        if keyval in attrs:
            self.delete(obj, attrs, keyval)
        attrs[keyval] = value

    def delete(self, obj: object, attrs: Attrs, keyval: int) -> None:
        """Remove the value under ``keyval``; its delete callback runs."""
        self._known(keyval, "Delete_attr")
        self._drop(obj, attrs, keyval)

    def _drop(self, obj: object, attrs: Attrs, keyval: int) -> None:
        if keyval not in attrs:
            return
        value = attrs.pop(keyval)
        delete_fn = self._callbacks_of(keyval)[1]
        if callable(delete_fn):
            _run(delete_fn, obj, keyval, value)

    def copied(self, obj: object, attrs: Attrs) -> Attrs:
        """The attributes a duplicate of ``obj`` gets, by each keyval's copy callback."""
        new: Attrs = {}
        for keyval, value in attrs.items():
            copy_fn = self._callbacks_of(keyval)[0]
            if copy_fn is None or copy_fn is False:
                continue
            copy = _run(copy_fn, obj, keyval, value) if callable(copy_fn) else value
            if copy is not NotImplemented:
                new[keyval] = copy
        return new

    def delete_all(self, obj: object, attrs: Attrs) -> None:
        """Free: delete every attribute (callbacks run, of freed keyvals too)."""
        for keyval in list(attrs):
            self._drop(obj, attrs, keyval)


def _run(fn: Callable[..., Any], obj: object, keyval: int, value: Any) -> Any:
    try:
        return fn(obj, keyval, value)
    except MPIException:
        raise
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        raise MPIException(ERR_OTHER, f"attribute callback raised {exc!r}") from exc
