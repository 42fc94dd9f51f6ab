"""The emurun shell: start the nicds, exchange routes, run the hosts, stop everything.

One trio nursery holds the watchers (one per process, never cancelled before the end), the
output forwarders and the signal handler. The job itself runs in ``run_scope``: start nicds,
wait for every NICD_READY, install the routing table, start hosts, wait for them. Whatever ends
it (all hosts done, the first failure, ``--timeout``, a signal) the shielded stop sequence is the
same: hosts (SIGTERM to the group, then SIGKILL), then nicds (they write their stats on
SIGTERM), then the psutil sweep, then the run directory. Every child holds the job's lifeline
(`nicd.lifeline`), so if emurun itself is killed they stop on their own; the run directory
names its owner, so the next emurun sweeps what such a job left (`cleanup.sweep_stale`).
"""

from __future__ import annotations

import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from launcher import cleanup, tuning
from launcher import plan as planmod
from launcher.children import (
    Child,
    LineReader,
    describe_exit,
    exit_code_of,
    job_signals,
    spawn,
    stop_children,
    tag_lines,
    write_all,
)
from launcher.errors import (
    EXIT_INTERNAL,
    EXIT_NOT_EXECUTABLE,
    EXIT_NOT_FOUND,
    EXIT_TIMEOUT,
    RendezvousError,
)
from launcher.forkclient import ForkServer, ForkServerError
from launcher.rendezvous import Rendezvous
from launcher.report import job_json, render
from nicd import manage
from nicd.lifeline import Lifeline
from nicd.ready import LOG_TAG_START, log_tag, socket_path

if TYPE_CHECKING:
    from launcher.plan import LaunchPlan
    from launcher.report import ProcessUsage

__all__ = ["Outcome", "run_job"]

_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes with the terminating NUL
_ROUTES_TIMEOUT_S = 30.0
_DRAIN_S = 2.0  # output still arriving after everything stopped
_ROOT_CAUSE_WAIT_S = 0.2  # a rank failing because its nicd died: let the nicd be blamed


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the job ended, if not by every rank exiting 0."""

    code: int
    """emurun's exit status."""
    message: str
    """Said on stderr, once."""


class Job:
    """One run of a plan."""

    def __init__(self, plan: LaunchPlan, run_dir: str, lifeline: Lifeline | None = None) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.lifeline = lifeline
        self.rendezvous = Rendezvous(plan.np)
        self.nicds: list[Child] = []
        self.hosts: list[Child] = []
        self.outcome: Outcome | None = None
        self.priority = plan.nic_priority
        self.forkserver: ForkServer | None = None
        self.run_scope = trio.CancelScope()
        self._all_ready = trio.Event()
        self._hosts_done = trio.Event()
        self._nicd_died = trio.Event()
        self._signals = 0
        self._open_streams = 0
        self._drained = trio.Event()
        self._placements = planmod.placements(plan, tuning.allowed_cpus())

    # -- the job --------------------------------------------------------------------------

    async def run(self) -> int:
        """Run the job to its end; return emurun's exit status."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._watch_signals)
            if self.plan.timeout is not None:
                self.run_scope.deadline = trio.current_time() + self.plan.timeout
            try:
                with self.run_scope:
                    self.forkserver = await self._start_forkserver()
                    await self._start_nicds(nursery)
                    if await self._exchange_routes():
                        await self._start_hosts(nursery)
                        await self._hosts_done.wait()
                if self.run_scope.cancelled_caught and self.outcome is None:
                    self.fail(EXIT_TIMEOUT, f"timed out after {self.plan.timeout:g} s")
            finally:
                with trio.CancelScope(shield=True):
                    await self._stop(self.hosts, group=True)
                    await self._stop(self.nicds, group=False)
                    if self.forkserver is not None:
                        await self.forkserver.aclose()
                    await self._sweep()
                    with trio.move_on_after(_DRAIN_S):
                        await self._drained.wait()
                    nursery.cancel_scope.cancel()
        return 0 if self.outcome is None else self.outcome.code

    def fail(self, code: int, message: str) -> None:
        """Record the first failure, say it, stop the job; later failures are ignored."""
        if self.outcome is not None:
            return
        self.outcome = Outcome(code, message)
        verb = "stopping the job" if not self._hosts_done.is_set() else "job stopped"
        self.say(f"{message}; {verb}", always=True)
        self.run_scope.cancel()

    def say(self, text: str, *, always: bool = False) -> None:
        """One ``emurun: ...`` line on stderr (failures even with --quiet)."""
        if always or not self.plan.quiet:
            write_all(2, f"emurun: {text}\n".encode())

    # -- phases ---------------------------------------------------------------------------

    async def _start_forkserver(self) -> ForkServer | None:
        """The zygote nicds and hosts are forked from (`launcher.forkserver`), or None."""
        if not self.plan.forkserver:
            return None
        env = planmod.nicd_env(self.plan, os.environ)
        env[cleanup.ENV_JOB_OWNER] = str(os.getpid())  # what the sweep sees of every fork
        try:
            return await ForkServer.start(self.plan.python, env)
        except (OSError, ForkServerError) as exc:
            self.say(f"{exc}; starting every process directly")
            return None

    async def _start_nicds(self, nursery: trio.Nursery) -> None:
        env = planmod.nicd_env(self.plan, os.environ)
        for node in range(self.plan.np):
            argv = planmod.nicd_argv(self.plan, node, self.run_dir)
            try:
                child = await spawn(
                    "nicd", node, argv, env, lifeline=self.lifeline, forkserver=self.forkserver
                )
            except OSError as exc:
                self.fail(EXIT_INTERNAL, f"cannot start the nicd of node {node}: {exc}")
                return
            self.nicds.append(child)
            self._track(nursery, child)
            cpus = self._placements[node].nicd_cpus
            if cpus is not None and (why := tuning.bind(child.pid, cpus)):
                self.say(why)
            assert child.process.stdout is not None
            assert child.process.stderr is not None
            nursery.start_soon(self._read_ready, child, child.process.stdout)
            nursery.start_soon(self._forward, child.process.stderr, 2, f"{log_tag(node)} ", child)
        with trio.move_on_after(self.plan.ready_timeout):
            await self._all_ready.wait()
        if not self._all_ready.is_set():
            missing = ", ".join(map(str, self.rendezvous.missing()))
            self.fail(EXIT_INTERNAL, f"no NICD_READY from nodes {missing} within "
                      f"{self.plan.ready_timeout:g} s")  # fmt: skip

    async def _exchange_routes(self) -> bool:
        if self.outcome is not None or not self._all_ready.is_set():
            return False
        routes = self.rendezvous.routes()

        async def install(node: int) -> None:
            path = self.rendezvous.socket(node)
            try:
                await trio.to_thread.run_sync(manage.set_routes, path, routes, _ROUTES_TIMEOUT_S)
            except Exception as exc:  # NicdError, OSError: the cluster cannot start
                self.fail(EXIT_INTERNAL, f"cannot install routes in nicd of node {node}: {exc}")

        async with trio.open_nursery() as installs:
            for node in range(self.plan.np):
                installs.start_soon(install, node)
        if self.outcome is not None:
            return False
        self.say(self._describe_setup())
        return True

    async def _start_hosts(self, nursery: trio.Nursery) -> None:
        for rank in range(self.plan.np):
            sock = self.rendezvous.socket(rank)
            env = planmod.host_env(self.plan, rank, self.run_dir, sock, os.environ)
            try:
                child = await spawn(
                    "host", rank, self.plan.program.argv, env,
                    lifeline=self.lifeline, forkserver=self.forkserver,
                )  # fmt: skip
            except OSError as exc:
                code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_NOT_EXECUTABLE
                self.fail(code, f"cannot start {self.plan.program.display} as rank {rank}: {exc}")
                return
            self.hosts.append(child)
            self._track(nursery, child)
            cpus = self._placements[rank].host_cpus
            if cpus is not None and (why := tuning.bind(child.pid, cpus)):
                self.say(why)
            if self.priority == "nice":
                tuning.make_nice(child.pid)
            assert child.process.stdout is not None
            assert child.process.stderr is not None
            prefix = f"[{rank}] " if self.plan.tag_output else None
            nursery.start_soon(self._forward, child.process.stdout, 1, prefix, child)
            nursery.start_soon(self._forward, child.process.stderr, 2, prefix, child)

    # -- watchers -------------------------------------------------------------------------

    def _track(self, nursery: trio.Nursery, child: Child) -> None:
        self._open_streams += 2  # stdout and stderr, each forwarded until EOF
        nursery.start_soon(self._watch, child)

    async def _watch(self, child: Child) -> None:
        await child.wait()
        code = child.returncode
        assert code is not None
        if child.role == "nicd":
            if not child.stopping:
                self._nicd_died.set()
                self.fail(EXIT_INTERNAL, f"{child.name} (pid {child.pid}) {describe_exit(code)}")
            return
        if code != 0 and not child.stopping:
            with trio.move_on_after(_ROOT_CAUSE_WAIT_S):
                await self._nicd_died.wait()
            self.fail(exit_code_of(code), f"{child.name} (pid {child.pid}) {describe_exit(code)}")
        if len(self.hosts) == self.plan.np and all(h.exited.is_set() for h in self.hosts):
            self._hosts_done.set()

    async def _read_ready(self, child: Child, stream: trio.abc.ReceiveStream) -> None:
        reader = LineReader(stream)
        block = await reader.read_lines()
        if block is not None:
            first, _, rest = block.partition(b"\n")
            try:
                if self.rendezvous.on_line(child.node, first):
                    self._all_ready.set()
                if self.priority == "rt":
                    self._make_realtime(child)
            except RendezvousError as exc:
                self.fail(EXIT_INTERNAL, f"{child.name}: {exc}")
            if rest:
                write_all(2, tag_lines(rest, f"{log_tag(child.node)} stdout: ".encode()))
        await self._forward_from(reader, 2, f"{log_tag(child.node)} stdout: ", child)

    def _make_realtime(self, child: Child) -> None:
        if not tuning.make_realtime(child.pid):
            self.priority = "nice"  # decided before any host starts: all hosts get niced

    async def _forward(
        self, stream: trio.abc.ReceiveStream, fd: int, prefix: str | None, child: Child
    ) -> None:
        await self._forward_from(LineReader(stream), fd, prefix, child)

    async def _forward_from(
        self, reader: LineReader, fd: int, prefix: str | None, child: Child
    ) -> None:
        raw_prefix = prefix.encode() if prefix is not None else None
        while (block := await reader.read_lines()) is not None:
            if raw_prefix is None:
                write_all(fd, block)
            else:  # nicd's own log lines already say "nicd[N]"
                keep = LOG_TAG_START.encode() if child.role == "nicd" else b""
                write_all(fd, tag_lines(block, raw_prefix, keep))
        self._open_streams -= 1
        if self._open_streams == 0:
            self._drained.set()

    async def _watch_signals(self, task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(*job_signals()) as signals:
            task_status.started()
            async for signum in signals:
                self._signals += 1
                name = signal.Signals(signum).name
                if self._signals == 1:
                    self.fail(128 + signum, f"got {name}")
                else:
                    self.say(f"got {name} again: killing everything", always=True)
                    for child in self.hosts:
                        child.signal(signal.SIGKILL, group=True)
                    for child in self.nicds:
                        child.signal(signal.SIGKILL, group=False)

    # -- stopping -------------------------------------------------------------------------

    async def _stop(self, children: list[Child], *, group: bool) -> None:
        for child in await stop_children(children, group=group, grace_s=self.plan.stop_grace):
            self.say(f"{child.name} (pid {child.pid}) would not die", always=True)

    async def _sweep(self) -> None:
        report = await trio.to_thread.run_sync(
            partial(cleanup.sweep, self.plan.job_id, None, owner=os.getpid())
        )
        cleanup.reap_orphans()
        if report.killed:
            self.say(f"cleanup killed leftover processes: {', '.join(report.killed)}")
        if report.segments:
            self.say(f"cleanup removed shared-memory segments: {', '.join(report.segments)}")
        for pid in report.survivors:
            self.say(f"process {pid} of the job survived SIGKILL", always=True)

    def _describe_setup(self) -> str:
        if self.priority == "rt":
            prio = f"nicd at SCHED_FIFO {tuning.NICD_RT_PRIORITY}"
        elif self.priority == "nice":
            why = "" if self.plan.nic_priority == "nice" else " (SCHED_FIFO not permitted)"
            prio = f"hosts at nice {tuning.HOST_NICE}{why}"
        else:
            prio = "no priorities"
        return (
            f"job {self.plan.job_id}: {self.plan.np} nodes ready; {prio}; "
            f"bind-to {self.plan.bind_to}; {planmod.describe_profile(self.plan)}"
        )

    def usages(self) -> list[ProcessUsage]:
        """CPU and wall time of every process that has exited."""
        return [c.usage for c in self.nicds + self.hosts if c.usage is not None]


def _sweep_stale_jobs(plan: LaunchPlan) -> None:
    """Sweep what killed launchers left in our TMPDIR (their processes, segments, dirs)."""
    for job_id, report in cleanup.sweep_stale(Path(tempfile.gettempdir())):
        if plan.quiet:
            continue
        what = [f"killed {', '.join(report.killed)}"] if report.killed else []
        what += [f"removed {', '.join(report.segments)}"] if report.segments else []
        what.append("removed its run directory")
        write_all(2, f"emurun: swept stale job {job_id} (its emurun died): "
                  f"{'; '.join(what)}\n".encode())  # fmt: skip


def run_job(plan: LaunchPlan) -> int:
    """Run ``plan`` to its end, clean up, report; return emurun's exit status."""
    started = time.monotonic()
    if plan.stats_dir is not None:
        os.makedirs(plan.stats_dir, exist_ok=True)
    _sweep_stale_jobs(plan)
    run_dir = tempfile.mkdtemp(prefix=f"{cleanup.RUN_DIR_PREFIX}{plan.job_id}-")
    cleanup.claim_run_dir(run_dir, plan.job_id)
    lifeline = Lifeline.create()
    job = Job(plan, run_dir, lifeline)
    me = os.getpid()
    if len(socket_path(run_dir, plan.np - 1)) > _SOCKET_PATH_MAX:
        cleanup.sweep(plan.job_id, run_dir, owner=me)
        lifeline.close()
        job.say(f"run directory {run_dir} is too long for a socket path: shorten TMPDIR",
                always=True)  # fmt: skip
        return EXIT_INTERNAL
    cleanup.adopt_orphans()
    try:
        code = trio.run(job.run)
    except KeyboardInterrupt:  # before the signal handler was installed
        code = 128 + signal.SIGINT
    finally:
        cleanup.sweep(plan.job_id, run_dir, owner=me)
        cleanup.reap_orphans()
        lifeline.close()
    wall = time.monotonic() - started
    if plan.cpu_report:
        write_all(2, (render(job.usages(), wall) + "\n").encode())
    if plan.stats_dir is not None:
        message = None if job.outcome is None else job.outcome.message
        doc = job_json(plan, code, message, job.priority, job.usages(), wall)
        with open(os.path.join(plan.stats_dir, "job.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return code
