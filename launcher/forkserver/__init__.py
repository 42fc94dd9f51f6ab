"""The fork server: a zygote per machine that imported nicd and the host library once and
forks every nicd and host process of a job on request, and the launcher's client of it.

* `records`: the wire records (Hello, Request, Started/Refused/Exited) and their codec (pure).
* `launch`: which requests a fork can serve exactly like a fresh interpreter (pure).
* `zygote`: the zygote's poll loop: preload, fork on request, reap, report.
* `child`: a forked child becoming the requested program.
* `client`: the launcher's side (trio): start the zygote, spawn through it, learn exits.

Imports flow one way: records and launch import nothing of the package; child imports them;
zygote imports child; client imports records and launch. This ``__init__`` imports none of
them, so the zygote (started as ``python -c '...; from launcher.forkserver.zygote import
main; main()' FD``, see `client._ZYGOTE_CODE`) loads no trio and its children inherit only
what they need.
"""

from __future__ import annotations

__all__: list[str] = []
