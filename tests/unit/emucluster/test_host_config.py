"""emucluster.config (every EMU_* variable of the host library, read once) and
emucluster.errors (one exception base for the package)."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

import emucluster
from emucluster import coll, config
from emucluster.coll.context import SimDeadlockError
from emucluster.config import ConfigError, HostConfig
from emucluster.errors import EmuclusterError
from emucluster.grim.port import RMError
from emucluster.mpi.errors import Exception as MPIException
from emucluster.nicvm import NicvmRunError
from emucluster.p2p.protocol import EAGER_LIMIT_BYTES, ProtocolError
from emucluster.port.client import McastChildDeadError, PortError, SendFailedError
from emucluster.port.progress import DeadlockError
from launcher import plan

PACKAGE = pathlib.Path(emucluster.__file__).parent
# Reads of the environment outside config.py still to convert (files of the host-loop
# refactor, issue 13 item 4); the list may only shrink.


def test_defaults_when_nothing_is_set() -> None:
    cfg = HostConfig.from_env({})
    assert cfg == HostConfig()
    assert (cfg.nic_socket, cfg.job_id, cfg.stats_dir) == (None, None, None)
    assert (cfg.wait, cfg.spin_us, cfg.eager_limit) == ("hybrid", config.DEFAULT_SPIN_US,
                                                        EAGER_LIMIT_BYTES)  # fmt: skip
    assert (cfg.match_store, cfg.rndv_rm, cfg.ab_delay_us) == ("lhs", True, 0.0)
    assert (cfg.mcast_tree, cfg.mcast_costs, dict(cfg.algorithms)) == ("postal", "", {})


def test_every_variable_is_read() -> None:
    environ = {
        "EMU_NIC_SOCKET": "/run/nic0",
        "EMU_JOB_ID": "abc",
        "EMU_STATS_DIR": "/tmp/stats",
        "EMU_WAIT": " Block ",
        "EMU_SPIN_US": "7.5",
        "EMU_EAGER_LIMIT": "1024",
        "EMU_MATCH_STORE": "list",
        "EMU_RNDV_RM": "0",
        "EMU_AB_DELAY_US": "200",
        "EMU_MCAST_TREE": "BINOMIAL",
        "EMU_MCAST_COSTS": " 10,0,1,0 ",
        "EMU_BCAST": "nic-mcast",
        "EMU_REDUCE": "app-bypass",
        "EMU_SIZE": "4",
        "HOME": "/root",
    }
    cfg = HostConfig.from_env(environ)
    assert cfg == HostConfig(
        nic_socket="/run/nic0", job_id="abc", stats_dir="/tmp/stats", wait="block",
        spin_us=7.5, eager_limit=1024, match_store="list", rndv_rm=False, ab_delay_us=200.0,
        mcast_tree="binomial", mcast_costs="10,0,1,0", size=4,
        algorithms={"EMU_BCAST": "nic-mcast", "EMU_REDUCE": "app-bypass"},
    )  # fmt: skip
    assert coll.get("bcast", environ=cfg.algorithms) is coll.get("bcast", "nic-mcast")


def test_empty_values_mean_unset_where_they_did() -> None:
    cfg = HostConfig.from_env({"EMU_NIC_SOCKET": "", "EMU_WAIT": "", "EMU_AB_DELAY_US": ""})
    assert (cfg.nic_socket, cfg.wait, cfg.ab_delay_us) == (None, "hybrid", 0.0)


def test_comm_world_is_the_jobs_size_not_the_nics_count() -> None:
    """A rank that opens its port after others spawned sees more nodes in its NIC's table
    than the job has ranks: COMM_WORLD takes EMU_SIZE (EMU_WORLD in a spawned process) and
    the NIC's count only when neither is set."""
    assert HostConfig.from_env({"EMU_SIZE": "3"}).world_of(5) == (0, 3)
    assert HostConfig.from_env({"EMU_SIZE": "2", "EMU_WORLD": "7:2"}).world_of(9) == (7, 2)
    assert HostConfig.from_env({}).world_of(4) == (0, 4)
    assert HostConfig.from_env({"EMU_SIZE": ""}).world_of(4) == (0, 4)


@pytest.mark.parametrize("name", ["EMU_EAGER_LIMIT", "EMU_SPIN_US", "EMU_AB_DELAY_US"])
def test_a_bad_number_names_its_variable(name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name}='many'") as info:
        HostConfig.from_env({name: "many"})
    assert isinstance(info.value, ValueError)


def test_the_config_is_frozen_and_every_field_documented() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        HostConfig().wait = "spin"  # type: ignore[misc]
    source = (PACKAGE / "config.py").read_text(encoding="utf-8")
    body = next(
        n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "HostConfig"
    ).body
    for i, node in enumerate(body):
        if isinstance(node, ast.AnnAssign):
            after = body[i + 1] if i + 1 < len(body) else None
            documented = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
            assert documented, f"HostConfig.{ast.unparse(node.target)} has no docstring"


def test_the_launcher_sets_the_names_declared_here() -> None:
    for name in ("ENV_RANK", "ENV_SIZE", "ENV_NIC_SOCKET", "ENV_RUN_DIR", "ENV_JOB_ID",
                 "ENV_STATS_DIR"):  # fmt: skip
        assert getattr(plan, name) is getattr(config, name)


def test_the_environment_is_read_only_in_config() -> None:
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "config.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("environ", "getenv")
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ):
                readers.add(relative)
    assert not readers, sorted(readers)


@pytest.mark.parametrize(
    "error",
    [
        ConfigError,
        PortError,
        SendFailedError,
        McastChildDeadError,
        ProtocolError,
        DeadlockError,
        RMError,
        NicvmRunError,
        coll.UnknownAlgorithmError,
        SimDeadlockError,
        MPIException,
    ],
)
def test_every_error_of_the_package_has_one_base(error: type[Exception]) -> None:
    assert issubclass(error, EmuclusterError)
    assert error.__doc__, f"{error.__name__} says nothing about who raises it"


def test_the_base_keeps_what_callers_caught_before() -> None:
    assert issubclass(MPIException, RuntimeError)  # as mpi4py's MPI.Exception
    assert issubclass(DeadlockError, RuntimeError)
    assert issubclass(SimDeadlockError, RuntimeError)
    assert issubclass(coll.UnknownAlgorithmError, ValueError)
    assert issubclass(ConfigError, ValueError)
