"""Collective algorithms by name: the registry the MPI layer looks each collective call up in.

Every algorithm is a generator function over one call's `CollContext` with the signature its
operation fixes (``emucluster.coll.context`` lists them; the Protocols below type them). The
MPICH host-based baselines live in this package and are registered by ``emucluster.coll``;
each offload adds itself with one line in ``emucluster.offload``::

    register("bcast", "nic-mcast", bcast_nic_mcast)

and is then chosen per call (``get("bcast", "nic-mcast")``), by environment (``EMU_BCAST=
nic-mcast``, which ``emurun --bcast nic-mcast`` sets), or not at all (`DEFAULTS`: the MPICH
baseline, except the barrier, whose ``auto`` takes the tree above 4 ranks, the bcast,
whose ``auto`` takes NIC multicast on COMM_WORLD from 3 ranks, and the reduce, whose ``auto``
sends straight to the root up to 32 ranks and 64 KiB). The
offloads sit above this package (they import it), so the registry loads them by name
(`OFFLOADS`) on its first lookup, never by an import statement.

This package is sans-IO: it never reads the process environment itself. The MPI layer passes
it in, ``get(op, environ=HostConfig.algorithms)``; without ``environ`` the default is the
baseline.

=========  =================================  ================================
operation  algorithms (baseline first)        reserved for later offloads
=========  =================================  ================================
barrier    dissemination, auto, tree,
           nic-mcast
bcast      binomial, auto, nic-mcast,
           nicvm
reduce     binomial, linear, auto,
           app-bypass
allreduce  recursive-doubling, reduce-bcast
gather     binomial
scatter    binomial
allgather  recursive-doubling, ring
alltoall   pairwise, scattered
scan       recursive-doubling, linear
exscan     recursive-doubling, linear
=========  =================================  ================================
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, overload

from emucluster.coll.context import CollGen
from emucluster.errors import EmuclusterError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from emucluster.coll.context import CollContext, Combine

__all__ = [
    "ARITY",
    "BASELINES",
    "DEFAULTS",
    "ENV_PREFIX",
    "OFFLOADS",
    "OPERATIONS",
    "RESERVED",
    "Algorithm",
    "AllgatherAlgorithm",
    "AllreduceAlgorithm",
    "AlltoallAlgorithm",
    "BarrierAlgorithm",
    "BcastAlgorithm",
    "Entry",
    "ExscanAlgorithm",
    "GatherAlgorithm",
    "Operation",
    "ReduceAlgorithm",
    "ScanAlgorithm",
    "ScatterAlgorithm",
    "UnknownAlgorithmError",
    "choices",
    "entry",
    "env_var",
    "get",
    "register",
]

Operation: TypeAlias = Literal[  # the collective operations that have algorithms
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "scatter",
    "allgather",
    "alltoall",
    "scan",
    "exscan",
]
OPERATIONS: tuple[Operation, ...] = (
    "barrier",
    "bcast",
    "reduce",
    "allreduce",
    "gather",
    "scatter",
    "allgather",
    "alltoall",
    "scan",
    "exscan",
)
ENV_PREFIX = "EMU_"  # EMU_BCAST, EMU_REDUCE, ... name the default algorithm of an operation
OFFLOADS = "emucluster.offload"
"""The package whose import registers the offload algorithms; loaded on the first lookup."""

BASELINES: dict[str, str] = {
    "barrier": "dissemination",
    "bcast": "binomial",
    "reduce": "binomial",
    "allreduce": "recursive-doubling",
    "gather": "binomial",
    "scatter": "binomial",
    "allgather": "recursive-doubling",
    "alltoall": "pairwise",
    "scan": "recursive-doubling",
    "exscan": "recursive-doubling",
}
"""The MPICH host-based algorithm of each operation (a nonblocking call falls back to it when
the chosen algorithm is blocking-only)."""

DEFAULTS: dict[str, str] = {**BASELINES, "barrier": "auto", "bcast": "auto", "reduce": "auto"}
"""What each operation runs unless told otherwise: the MPICH baseline, except three. Measured
at 16 nodes on 2 cores (issue 17), the emulated path is CPU-bound and a message costs more
than a step: the barrier's ``auto`` runs dissemination up to 4 ranks and the 30-message tree
above (MPICH's dissemination sends 64); the bcast's ``auto``
(``emucluster.offload.nic_mcast.auto``) hands it to the NICs as MPICH-GM with NIC multicast
would, where that is safe (COMM_WORLD and COMM_SELF, 3 ranks or more, blocking calls); the
reduce's ``auto`` (``emucluster.coll.reduce``) sends every rank's data straight to the root up
to 32 ranks and 64 KiB, one step instead of the tree's ``log2(size)``. Application-bypass
reduce stays opt-in (``emubench mpi-compare --candidates`` measures every choice)."""

RESERVED: dict[str, frozenset[str]] = {}
"""Names kept for offloads registered by later work; asking for one before then is an error
that says so, rather than "unknown"."""

ARITY: dict[str, int] = {
    "barrier": 1,
    "bcast": 3,
    "reduce": 4,
    "allreduce": 3,
    "gather": 3,
    "scatter": 3,
    "allgather": 2,
    "alltoall": 2,
    "scan": 3,
    "exscan": 3,
}
"""Positional arguments each operation's algorithms take, the context included."""

Algorithm: TypeAlias = Callable[..., CollGen[object]]
"""Any collective algorithm, untyped by operation (the registry's storage type)."""


class BarrierAlgorithm(Protocol):
    """``barrier(ctx)``: returns once every rank has entered."""

    def __call__(self, ctx: CollContext, /) -> CollGen[None]: ...


class BcastAlgorithm(Protocol):
    """``bcast(ctx, data, root)``: ``data`` at the root (None elsewhere); all return it."""

    def __call__(self, ctx: CollContext, data: bytes | None, root: int, /) -> CollGen[bytes]: ...


class ReduceAlgorithm(Protocol):
    """``reduce(ctx, data, combine, root)``: the root returns the rank-order reduction."""

    def __call__(
        self, ctx: CollContext, data: bytes, combine: Combine, root: int, /
    ) -> CollGen[bytes | None]: ...


class AllreduceAlgorithm(Protocol):
    """``allreduce(ctx, data, combine)``: every rank returns the rank-order reduction."""

    def __call__(self, ctx: CollContext, data: bytes, combine: Combine, /) -> CollGen[bytes]: ...


class GatherAlgorithm(Protocol):
    """``gather(ctx, data, root)``: the root returns all blocks in rank order, others None."""

    def __call__(
        self, ctx: CollContext, data: bytes, root: int, /
    ) -> CollGen[list[bytes] | None]: ...


class ScatterAlgorithm(Protocol):
    """``scatter(ctx, data, root)``: ``size`` blocks at the root; rank i returns block i."""

    def __call__(
        self, ctx: CollContext, data: Sequence[bytes] | None, root: int, /
    ) -> CollGen[bytes]: ...


class AllgatherAlgorithm(Protocol):
    """``allgather(ctx, data)``: every rank returns all blocks in rank order."""

    def __call__(self, ctx: CollContext, data: bytes, /) -> CollGen[list[bytes]]: ...


class AlltoallAlgorithm(Protocol):
    """``alltoall(ctx, data)``: ``data[j]`` goes to rank j; returns blocks by source."""

    def __call__(self, ctx: CollContext, data: Sequence[bytes], /) -> CollGen[list[bytes]]: ...


class ScanAlgorithm(Protocol):
    """``scan(ctx, data, combine)``: rank r returns ``d0 op ... op dr``."""

    def __call__(self, ctx: CollContext, data: bytes, combine: Combine, /) -> CollGen[bytes]: ...


class ExscanAlgorithm(Protocol):
    """``exscan(ctx, data, combine)``: rank r returns ``d0 op ... op d(r-1)``, rank 0 None."""

    def __call__(
        self, ctx: CollContext, data: bytes, combine: Combine, /
    ) -> CollGen[bytes | None]: ...


class UnknownAlgorithmError(ValueError, EmuclusterError):
    """Raised by `get` (and `register`) for an operation or algorithm name it does not know.

    The message lists the valid names; the caller (a user setting ``EMU_BCAST`` or ``emurun
    --bcast``) should pick one of `choices`. ``reserved`` is True for a name kept for an
    offload that is not available yet.
    """

    def __init__(
        self,
        operation: str,
        name: str | None,
        choices: Sequence[str],
        *,
        reserved: bool = False,
        source: str = "",
    ) -> None:
        self.operation = operation
        self.name = name
        self.choices = tuple(choices)
        self.reserved = reserved
        where = f" (from {source})" if source else ""
        if name is None:
            message = f"unknown collective operation {operation!r}; operations: "
        elif reserved:
            message = (
                f"{operation} algorithm {name!r}{where} is reserved for an offload that is not "
                f"available yet; choices: "
            )
        else:
            message = f"unknown {operation} algorithm {name!r}{where}; choices: "
        super().__init__(message + ", ".join(self.choices))


@dataclass(frozen=True, slots=True)
class Entry:
    """One registered algorithm and what the caller must know about it."""

    name: str
    """Its registered name (``nic-mcast``)."""
    algorithm: Algorithm
    """The generator function."""
    blocking_only: bool = False
    """It may only run inside a blocking call (application bypass runs its synchronous part
    inside the call); a nonblocking call takes the operation's baseline instead."""


_ALGORITHMS: dict[str, dict[str, Entry]] = {operation: {} for operation in OPERATIONS}
_offloads_loaded = False


def register(operation: str, name: str, algorithm: Algorithm, *, replace: bool = False,
             blocking_only: bool = False) -> None:  # fmt: skip
    """Make ``algorithm`` available as ``name`` for ``operation``.

    Names are lowercase words joined by hyphens. Registering a name twice raises ValueError
    unless ``replace`` (tests swapping an implementation). ``blocking_only``: see `Entry`.
    """
    table = _ALGORITHMS.get(operation)
    if table is None:
        raise UnknownAlgorithmError(operation, None, OPERATIONS)
    if not name or name != name.strip().lower():
        raise ValueError(f"algorithm name {name!r} must be non-empty, lowercase, unpadded")
    if name in table and not replace:
        raise ValueError(f"{operation} algorithm {name!r} is already registered")
    try:
        inspect.signature(algorithm).bind(*range(ARITY[operation]))
    except TypeError as exc:
        raise TypeError(
            f"{operation} algorithm {name!r} must take {ARITY[operation]} positional "
            f"arguments (see emucluster.coll.context): {exc}"
        ) from None
    table[name] = Entry(name, algorithm, blocking_only)


def _load_offloads() -> None:
    """Import `OFFLOADS` once (it registers the offloads; a re-entrant call is a no-op)."""
    global _offloads_loaded
    if not _offloads_loaded:
        _offloads_loaded = True
        importlib.import_module(OFFLOADS)


def choices(operation: str) -> tuple[str, ...]:
    """The registered algorithm names of ``operation``, the baseline first."""
    _load_offloads()
    table = _ALGORITHMS.get(operation)
    if table is None:
        raise UnknownAlgorithmError(operation, None, OPERATIONS)
    baseline = BASELINES[operation]
    return (baseline, *sorted(name for name in table if name != baseline))


def env_var(operation: str) -> str:
    """The environment variable naming ``operation``'s default algorithm (``EMU_BCAST``)."""
    return ENV_PREFIX + operation.upper()


@overload
def get(
    operation: Literal["barrier"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> BarrierAlgorithm: ...
@overload
def get(
    operation: Literal["bcast"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> BcastAlgorithm: ...
@overload
def get(
    operation: Literal["reduce"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ReduceAlgorithm: ...
@overload
def get(
    operation: Literal["allreduce"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> AllreduceAlgorithm: ...
@overload
def get(
    operation: Literal["gather"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> GatherAlgorithm: ...
@overload
def get(
    operation: Literal["scatter"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ScatterAlgorithm: ...
@overload
def get(
    operation: Literal["allgather"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> AllgatherAlgorithm: ...
@overload
def get(
    operation: Literal["alltoall"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> AlltoallAlgorithm: ...
@overload
def get(
    operation: Literal["scan"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ScanAlgorithm: ...
@overload
def get(
    operation: Literal["exscan"],
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ExscanAlgorithm: ...
@overload
def get(
    operation: str,
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Algorithm: ...
def get(
    operation: str,
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> object:
    """The algorithm to run ``operation`` with (the `entry` of that name's ``algorithm``)."""
    return entry(operation, algorithm, environ=environ).algorithm


def entry(
    operation: str,
    algorithm: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> Entry:
    """The registry entry to run ``operation`` with.

    ``algorithm`` names it explicitly (a per-call choice). Otherwise ``environ[EMU_<OP>]``
    (e.g. ``EMU_BCAST``) names it if set and non-empty; otherwise `DEFAULTS`. Names are
    matched case-insensitively. An unknown or reserved name raises `UnknownAlgorithmError`
    listing the choices.
    """
    _load_offloads()
    table = _ALGORITHMS.get(operation)
    if table is None:
        raise UnknownAlgorithmError(operation, None, OPERATIONS)
    source = ""
    if algorithm is None and environ is not None:
        variable = env_var(operation)
        value = environ.get(variable, "").strip()
        if value:
            algorithm, source = value, variable
    name = DEFAULTS[operation] if algorithm is None else algorithm.strip().lower()
    found = table.get(name)
    if found is None:
        reserved = name in RESERVED.get(operation, frozenset())
        raise UnknownAlgorithmError(
            operation, name, choices(operation), reserved=reserved, source=source
        )
    return found
