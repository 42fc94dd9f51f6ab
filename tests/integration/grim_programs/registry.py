"""Registry consistency: same name -> same id on every rank, late registrations, unknown ids."""

from __future__ import annotations

import json

from emucluster import am

ep = am.endpoint()
rank, size = ep.rank, ep.size
tables: dict[int, dict[str, int]] = {}
got: list[str] = []

am.register("common", lambda s, a, p: got.append(f"common from {s}"))
am.register(f"only{rank}", lambda s, a, p: got.append(f"only{rank} from {s}"))
am.register("table", lambda s, a, p: tables.__setitem__(s, json.loads(p)))
am.sync()
am.barrier()
# Every rank resolves every name, its own and the others' (the others' by asking the registry).
names = ["common", "table", *(f"only{r}" for r in range(size))]
mine = {n: am.handler_id(n) for n in names}
am.send(0, "table", payload=json.dumps(mine).encode())
am.barrier()
consistent = rank != 0 or (len(tables) == size and all(t == mine for t in tables.values()))
# Late registration: the last rank registers a name after the barrier; rank 0 learns it by lookup.
if rank == size - 1:
    am.register("late", lambda s, a, p: got.append(f"late from {s}"))
    am.sync()
am.barrier()
late_id = am.handler_id("late")
am.send(size - 1, "late", (rank, 0, 0, 0))
# Unknown handler ids at the receiver: a made-up id, and a name rank 1 never registered locally.
if rank == 0 and size > 1:
    am.send(1, 60000)
    am.send(1, "only0")
am.barrier()
ep.wait_for(lambda: rank != size - 1 or sum("late" in g for g in got) == size, 30)
ep.flush()
am.barrier()
stats = ep.stats()
print(
    "RESULT "
    + json.dumps(
        {
            "rank": rank,
            "ids": mine,
            "late": late_id,
            "consistent": consistent,
            "unknown": stats["counts"].get("unknown_handler", 0),
            "got": sorted(got),
            "errors": stats["errors"],
        }
    ),
    flush=True,
)
