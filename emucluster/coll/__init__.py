"""Collective algorithms (pure): the registry, the collective-call contract, the baselines.

* ``registry.py``: algorithms by operation and name (`get`, `register`, `choices`);
* ``context.py``: what an algorithm sees of one call (`CollContext`) and the in-memory
  `simulate` runner;
* ``trees``, ``payload``, ``tags`` and one file per family of MPICH host-based baselines
  (DESIGN §6), registered here.

The offloads (``emucluster.offload``) register themselves into the same registry. This package
never imports the MPI layer or the offloads; it is sans-IO and never reads the process
environment itself (the MPI layer passes it in: ``get(op, environ=...)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from emucluster.coll.allgather import allgather_recursive_doubling, allgather_ring
from emucluster.coll.allreduce import allreduce_recursive_doubling, allreduce_reduce_bcast
from emucluster.coll.alltoall import alltoall_pairwise, alltoall_scattered
from emucluster.coll.barrier import barrier_auto, barrier_dissemination, barrier_tree
from emucluster.coll.binomial import bcast_binomial, reduce_binomial
from emucluster.coll.gather import gather_binomial, scatter_binomial
from emucluster.coll.reduce import reduce_auto, reduce_linear
from emucluster.coll.registry import (
    ARITY,
    BASELINES,
    DEFAULTS,
    ENV_PREFIX,
    OFFLOADS,
    OPERATIONS,
    RESERVED,
    Algorithm,
    AllgatherAlgorithm,
    AllreduceAlgorithm,
    AlltoallAlgorithm,
    BarrierAlgorithm,
    BcastAlgorithm,
    Entry,
    ExscanAlgorithm,
    GatherAlgorithm,
    Operation,
    ReduceAlgorithm,
    ScanAlgorithm,
    ScatterAlgorithm,
    UnknownAlgorithmError,
    choices,
    entry,
    env_var,
    get,
    register,
)
from emucluster.coll.scan import (
    exscan_linear,
    exscan_recursive_doubling,
    scan_linear,
    scan_recursive_doubling,
)

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

# -- the MPICH host-based baselines (DESIGN §6) --------------------------------------------------
if TYPE_CHECKING:  # mypy checks each baseline against its operation's Protocol
    _TYPED: tuple[
        BarrierAlgorithm,
        BarrierAlgorithm,
        BarrierAlgorithm,
        BcastAlgorithm,
        ReduceAlgorithm,
        ReduceAlgorithm,
        ReduceAlgorithm,
        AllreduceAlgorithm,
        AllreduceAlgorithm,
        GatherAlgorithm,
        ScatterAlgorithm,
        AllgatherAlgorithm,
        AllgatherAlgorithm,
        AlltoallAlgorithm,
        AlltoallAlgorithm,
        ScanAlgorithm,
        ScanAlgorithm,
        ExscanAlgorithm,
        ExscanAlgorithm,
    ] = (
        barrier_dissemination,
        barrier_tree,
        barrier_auto,
        bcast_binomial,
        reduce_binomial,
        reduce_linear,
        reduce_auto,
        allreduce_recursive_doubling,
        allreduce_reduce_bcast,
        gather_binomial,
        scatter_binomial,
        allgather_recursive_doubling,
        allgather_ring,
        alltoall_pairwise,
        alltoall_scattered,
        scan_recursive_doubling,
        scan_linear,
        exscan_recursive_doubling,
        exscan_linear,
    )

register("barrier", "dissemination", barrier_dissemination)
register("barrier", "tree", barrier_tree)
register("barrier", "auto", barrier_auto)
register("bcast", "binomial", bcast_binomial)
register("reduce", "binomial", reduce_binomial)
register("reduce", "linear", reduce_linear)
register("reduce", "auto", reduce_auto)
register("allreduce", "recursive-doubling", allreduce_recursive_doubling)
register("allreduce", "reduce-bcast", allreduce_reduce_bcast)
register("gather", "binomial", gather_binomial)
register("scatter", "binomial", scatter_binomial)
register("allgather", "recursive-doubling", allgather_recursive_doubling)
register("allgather", "ring", allgather_ring)
register("alltoall", "pairwise", alltoall_pairwise)
register("alltoall", "scattered", alltoall_scattered)
register("scan", "recursive-doubling", scan_recursive_doubling)
register("scan", "linear", scan_linear)
register("exscan", "recursive-doubling", exscan_recursive_doubling)
register("exscan", "linear", exscan_linear)
