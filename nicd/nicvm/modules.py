"""Stock module sources: the thesis's Fig 4.3 broadcast, a no-op, and a payload transform.

``BCAST_BINARY_TREE`` is Fig 4.3 character for character (the module the thesis's broadcast
experiments used); the NICVM broadcast collective uploads it, and the benchmark times it.
"""

from __future__ import annotations

__all__ = ["BCAST_BINARY_TREE", "NOOP", "SCALE_F64"]

BCAST_BINARY_TREE = """\
func main()

    var size;
    var rank;
    var result;
    var child;

    size = mpi_get_size();
    rank = mpi_get_rank();
    result = NICVM_RESULT_SUCCESS;

    child = ((rank + 1) * 2) - 1;
    if (child < size) then
        if (rank == mpi_get_root()) then
            result = NICVM_RESULT_PACKET_CONSUMED;
        end if;

        mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, child);

        child = child + 1;
        if (child < size) then
            mpi_send_message(GM_ST_RELIABLE_NICVM_NIC_DATA, child);
        end if;
    end if;

    return result;
end func;
"""
"""Thesis Fig 4.3: forward to the children of a binary tree rooted at the operation's root."""

NOOP = """\
func main()
    return NICVM_RESULT_SUCCESS;
end func;
"""
"""The Fig 4.10 echo module: does nothing, lets the packet through."""

SCALE_F64 = """\
// Multiply every float64 of the payload by header argument 0, in place.
func main()
    var i;
    var n;
    var k: float;
    n = packet_length() / 8;
    k = to_float(packet_get_arg(0));
    i = 0;
    while i < n do
        payload_set_f64(i, payload_get_f64(i) * k);
        i = i + 1;
    end while;
    return NICVM_RESULT_SUCCESS;
end func;
"""
"""A data transform (thesis §4.3.1's planned payload customisation): scale a float64 vector."""
