"""Topologies and neighbour collectives on any number of nodes; prints "topo ok <rank>".

Every result is checked against what the topology says the neighbours sent: a periodic ring,
a non-periodic 2-D grid (PROC_NULL edges leave receive blocks untouched), Cart.Sub, a graph,
and a distributed graph with a duplicate edge, blocking and nonblocking, objects and buffers.
"""

from __future__ import annotations

import array

from emucluster import MPI

world = MPI.COMM_WORLD
rank, size = world.rank, world.size
UNTOUCHED = -7


def check(what: str, got: object, want: object) -> None:
    if got != want:
        raise AssertionError(f"rank {rank}: {what}: got {got!r}, want {want!r}")


def sent_by(comm: MPI.Topocomm, peer: int, block: int) -> int:
    """What rank ``peer`` puts in its out-block ``block`` in the alltoall calls below."""
    return 1000 * peer + block


def expected_alltoall(comm: MPI.Topocomm) -> list[int]:
    """Per in-edge: the block the in-neighbour addressed to us (matching duplicate edges in
    order), or UNTOUCHED for PROC_NULL."""
    me = comm.Get_rank()
    want: list[int] = []
    if isinstance(comm, MPI.Cartcomm):
        for k, peer in enumerate(comm.inedges):
            want.append(UNTOUCHED if peer == MPI.PROC_NULL else sent_by(comm, peer, k ^ 1))
        return want
    taken: dict[int, int] = {}
    for peer in comm.inedges:
        outs = [b for b, d in enumerate(peer_outedges(comm, peer)) if d == me]
        n = taken.get(peer, 0)
        taken[peer] = n + 1
        want.append(sent_by(comm, peer, outs[n]))
    return want


def peer_outedges(comm: MPI.Topocomm, peer: int) -> list[int]:
    return comm.allgather(comm.outedges)[peer]


def exercise(comm: MPI.Topocomm) -> None:
    me = comm.Get_rank()
    ins, outs = comm.inedges, comm.outedges
    # objects
    got = comm.neighbor_allgather(me)
    check("neighbor_allgather", got, [None if p == MPI.PROC_NULL else p for p in ins])
    want = expected_alltoall(comm)
    got = comm.neighbor_alltoall([sent_by(comm, me, b) for b in range(len(outs))])
    check("neighbor_alltoall", got, [None if w == UNTOUCHED else w for w in want])
    # buffers, blocking and nonblocking
    send = array.array("i", [sent_by(comm, me, b) for b in range(len(outs))])
    recv = array.array("i", [UNTOUCHED] * len(ins))
    comm.Neighbor_alltoall([send, MPI.INT], [recv, MPI.INT])
    check("Neighbor_alltoall", list(recv), want)
    recv = array.array("i", [UNTOUCHED] * len(ins))
    comm.Ineighbor_alltoall([send, MPI.INT], [recv, MPI.INT]).Wait()
    check("Ineighbor_alltoall", list(recv), want)
    recv = array.array("i", [UNTOUCHED] * len(ins))
    comm.Ineighbor_allgather([array.array("i", [me]), MPI.INT], [recv, MPI.INT]).Wait()
    check("Ineighbor_allgather", list(recv), [UNTOUCHED if p == MPI.PROC_NULL else p for p in ins])
    # v-forms: block k holds 1 element at displacement 2k (the odd slots stay untouched)
    recv = array.array("i", [UNTOUCHED] * (2 * len(ins)))
    spec = [recv, ([1] * len(ins), [2 * k for k in range(len(ins))]), MPI.INT]
    comm.Neighbor_alltoallv([send, ([1] * len(outs), list(range(len(outs)))), MPI.INT], spec)
    check("Neighbor_alltoallv", list(recv[::2]), want)
    check("Neighbor_alltoallv gaps", set(recv[1::2]) | {UNTOUCHED}, {UNTOUCHED})
    recv = array.array("i", [UNTOUCHED] * len(ins))
    comm.Ineighbor_allgatherv([array.array("i", [me]), MPI.INT], [recv, MPI.INT]).Wait()
    check("Ineighbor_allgatherv", list(recv), [UNTOUCHED if p == MPI.PROC_NULL else p for p in ins])


ring = world.Create_cart([size], periods=[True])
exercise(ring)
dims = MPI.Compute_dims(size, 2)
grid = world.Create_cart(dims, periods=[False, False])
exercise(grid)
for keep in ([True, False], [False, True]):
    sub = grid.Sub(keep)
    check("Sub dims", sub.dims, [d for d, k in zip(dims, keep, strict=True) if k])
    exercise(sub)
    sub.Free()
index = [2 * (i + 1) for i in range(size)]
edges = [e for i in range(size) for e in ((i - 1) % size, (i + 1) % size)]
graph = world.Create_graph(index, edges)
exercise(graph)
right = (rank + 1) % size
dist = world.Create_dist_graph([rank], [3], [right, right, rank])
check("dist outedges", dist.outedges, [right, right, rank])
exercise(dist)
for comm in (ring, grid, graph, dist):
    comm.Free()
print(f"topo ok {rank}", flush=True)
