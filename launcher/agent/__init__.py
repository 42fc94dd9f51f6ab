"""``emuproxy``: the per-host agent of a multi-host emurun job (one process per host and job).

It dials emurun, proves the job's token, runs the nicds and host processes of the nodes emurun
gives it, forwards their ready lines, output and exits, and cleans up after itself. It lives
in the launcher package because it *is* the launcher's local half: its node runner
(`launcher.agent.nodes.LocalNodes`) is also what a one-machine emurun drives in-process
(`launcher.localhost`), and ``python -m launcher.agent`` runs it.
"""
