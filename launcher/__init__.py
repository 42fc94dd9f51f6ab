"""emurun: the mpirun of the emulated cluster.

From the top down: `cli` (argv -> `plan.LaunchPlan`) hands the plan to `tracing.traced_job`
and `job.run_job`; the job driver (`job`) runs it over the hosts a gate admits (`hosts`:
`localhost.LocalGate` on this machine, `multihost.gate.AgentGate` across machines), speaking
`control` messages to each; every host's nodes are run by `agent.nodes.LocalNodes`, in
emurun's process or in an ``emuproxy`` agent (`agent`), which starts processes (`children`,
through the zygote of `forkserver` where it can), places them (`tuning`), exchanges addresses
(`rendezvous`) and sweeps what is left (`cleanup`; `warden`, a process of its own, sweeps
if the launcher dies); `report` says what the job cost.
Pure rules: `plan`, `rendezvous`, `control`, `forkserver.records`, `forkserver.launch`,
`multihost.hostfile`, `multihost.starters`.
"""

from __future__ import annotations

__all__: list[str] = []
