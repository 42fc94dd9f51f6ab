"""Info objects (mpi4py's ``MPI.Info``): ordered string key/value hints, local to a process.

Hints are kept and returned, never acted on (no hint changes what emucluster does). The
dictionary interface (``info["k"]``, ``items()``, ``update``...) is mpi4py's; ``INFO_NULL`` is
the handle with no dictionary, and every call on it raises ERR_INFO. Keys and values are
bounded as MPICH bounds them (`MAX_INFO_KEY`, `MAX_INFO_VAL`).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from emucluster.mpi.errors import ERR_INFO, ERR_INFO_KEY, ERR_INFO_NOKEY, ERR_INFO_VALUE
from emucluster.mpi.errors import Exception as MPIException
from emucluster.mpi.handles import Handled

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["INFO_ENV", "INFO_NULL", "MAX_INFO_KEY", "MAX_INFO_VAL", "Info", "set_maxprocs"]

MAX_INFO_KEY = 255  # MPICH's MPI_MAX_INFO_KEY
MAX_INFO_VAL = 1024  # MPICH's MPI_MAX_INFO_VAL


_maxprocs: list[int] = []  # [nodes in the job] while MPI is initialized (`set_maxprocs`)


def set_maxprocs(nodes: int | None) -> None:
    """The library is initialized over ``nodes`` nodes (None: finalized): ``Create_env``
    reports it as ``maxprocs``. Called by ``emucluster.mpi.lifecycle``, which sits above."""
    _maxprocs[:] = [] if nodes is None else [nodes]


class Info(Handled):
    """An info object (INFO_NULL when it has no dictionary)."""

    __slots__ = ("_d",)

    def _handle_key(self) -> object:
        return self._d

    _d: dict[str, str] | None

    def __new__(cls, info: Info | None = None) -> Info:
        """A handle to ``info``'s object (INFO_NULL if None)."""
        if info is not None and not isinstance(info, Info):
            raise TypeError(f"{cls.__name__}() takes an Info, not {type(info).__name__}")
        self = object.__new__(cls)
        self._d = None if info is None else info._d
        return self

    @classmethod
    def _of(cls, d: dict[str, str]) -> Info:
        info = cls.__new__(cls)
        info._d = d
        return info

    def _dict(self) -> dict[str, str]:
        if self._d is None:
            raise MPIException(ERR_INFO, "the info object is INFO_NULL (or freed)")
        return self._d

    # -- handle semantics ---------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Info):
            return NotImplemented
        return self._d is other._d

    __hash__ = None  # type: ignore[assignment]  # unhashable, as mpi4py's handles

    def __bool__(self) -> bool:
        return self._d is not None

    def __repr__(self) -> str:
        return "<emucluster.MPI.Info INFO_NULL>" if self._d is None else f"<Info {self._d}>"

    def __reduce__(self) -> tuple[Any, ...]:
        if self is INFO_NULL:
            return _restore, ("INFO_NULL",)
        if self is INFO_ENV:
            return _restore, ("INFO_ENV",)
        if self._d is None:
            return type(self), ()
        if self == INFO_ENV:
            return type(self), (INFO_ENV,)
        return _rebuild, (type(self), list(self._d.items()))

    # -- MPI calls ----------------------------------------------------------------------------

    @classmethod
    def Create(cls, items: Any = None) -> Info:
        """A new, empty info object (filled from ``items`` if given)."""
        info = cls._of({})
        if items is not None:
            info.update(items)
        return info

    @classmethod
    def Create_env(cls, args: Iterable[str] | None = None) -> Info:
        """An info object describing how the program was started (MPI 4 INFO_ENV keys)."""
        argv = list(sys.argv if args is None else args)
        d = {"command": argv[0] if argv else "", "argv": " ".join(argv[1:])}
        if _maxprocs:
            d["maxprocs"] = str(_maxprocs[0])
        d["wdir"] = os.getcwd()
        return cls._of(d)

    def Free(self) -> None:
        """Free the object; the handle becomes INFO_NULL."""
        self._dict()
        if self is INFO_ENV:
            raise MPIException(ERR_INFO, "cannot free INFO_ENV")
        self._d = None

    def free(self) -> None:
        """Free safely (mpi4py): INFO_ENV and INFO_NULL stay; another handle of INFO_ENV
        becomes null without freeing it; any other info object is freed."""
        if self is INFO_ENV or self._d is None:
            return
        if self._d is INFO_ENV._d:
            self._d = None
            return
        self.Free()

    def Dup(self) -> Info:
        """A copy."""
        return type(self)._of(dict(self._dict()))

    def Get(self, key: str) -> str | None:
        """The value of ``key``, None if not set."""
        return self._dict().get(_key(key))

    def Set(self, key: str, value: str) -> None:
        """Set ``key`` to ``value``."""
        d = self._dict()
        value = str(value)
        if len(value) > MAX_INFO_VAL:
            raise MPIException(ERR_INFO_VALUE, f"info value longer than {MAX_INFO_VAL}")
        d[_key(key)] = value

    def Delete(self, key: str) -> None:
        """Remove ``key`` (ERR_INFO_NOKEY if not set)."""
        d = self._dict()
        try:
            del d[_key(key)]
        except KeyError:
            raise MPIException(ERR_INFO_NOKEY, f"no info key {key!r}") from None

    def Get_nkeys(self) -> int:
        """Number of keys."""
        return len(self._dict())

    def Get_nthkey(self, n: int) -> str:
        """The ``n``-th key (in insertion order)."""
        keys = list(self._dict())
        if not 0 <= n < len(keys):
            raise MPIException(ERR_INFO_KEY, f"no key number {n} (of {len(keys)})")
        return keys[n]

    # -- the dictionary interface (mpi4py's: on INFO_NULL, lookups and stores raise KeyError) --

    def __len__(self) -> int:
        return len(self._d) if self._d is not None else 0

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in (self._d or {})

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._dict()))

    def __getitem__(self, key: str) -> str:
        value = self.Get(key) if self else None
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: str, value: str) -> None:
        if not self:
            raise KeyError(key)
        self.Set(key, value)

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        self.Delete(key)

    def get(self, key: str, default: str | None = None) -> str | None:
        """The value of ``key`` or ``default``."""
        value = self.Get(key) if self else None
        return default if value is None else value

    def keys(self) -> list[str]:
        """The keys."""
        return list(self._d or {})

    def values(self) -> list[str]:
        """The values."""
        return list((self._d or {}).values())

    def items(self) -> list[tuple[str, str]]:
        """The (key, value) pairs."""
        return list((self._d or {}).items())

    def update(self, items: Any = (), **kwds: str) -> None:
        """Set every pair of ``items`` (a mapping or pairs) and of ``kwds``."""
        if not self:
            raise KeyError("update of INFO_NULL")
        pairs = items.items() if hasattr(items, "items") else items
        for key, value in [*pairs, *kwds.items()]:
            self.Set(key, value)

    def pop(self, key: str, *default: str) -> str:
        """Remove ``key`` and return its value."""
        value = self.Get(key) if self else None
        if value is None:
            if default:
                return default[0]
            raise KeyError(key)
        self.Delete(key)
        return value

    def popitem(self) -> tuple[str, str]:
        """Remove and return the last pair."""
        d = self._d or {}
        if not d:
            raise KeyError("popitem(): info is empty")
        return d.popitem()

    def copy(self) -> Info:
        """A copy (``Dup``; INFO_NULL's copy is a null handle)."""
        return self.Dup() if self else type(self)()

    def clear(self) -> None:
        """Remove every key."""
        if self._d is not None:
            self._d.clear()


def _key(key: str) -> str:
    key = str(key)
    if not key or len(key) > MAX_INFO_KEY:
        raise MPIException(ERR_INFO_KEY, f"invalid info key of length {len(key)}")
    return key


def _restore(name: str) -> Info:
    found: Info = globals()[name]
    return found


def _rebuild(cls: type[Info], items: list[tuple[str, str]]) -> Info:
    return cls._of(dict(items))


INFO_NULL = Info()
INFO_ENV = Info.Create_env()
