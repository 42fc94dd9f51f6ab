"""emucluster.pmi.bootstrap's decisions, without starting anything: when a process counts as
started by a PMI launcher, the job id every rank derives, the node count of a
PMI_process_mapping (Flux RFC 13's examples), the address a nicd listens on, a bad timeout."""

from __future__ import annotations

import pytest

from emucluster.pmi import bootstrap
from emucluster.pmi.bootstrap import BootstrapError, attach, job_id_of, node_count


def test_nothing_to_do_outside_a_pmi_launcher_or_under_emurun() -> None:
    assert attach({}) is None
    assert attach({"PMI_RANK": "0", "PMI_SIZE": "2"}) is None  # no way to reach a manager
    emurun = {"PMI_FD": "5", "EMU_NIC_SOCKET": "/run/emurun-x/nic0.sock"}
    assert attach(emurun) is None  # emurun's rank under an outer mpiexec stays emurun's


def test_a_bad_timeout_is_named() -> None:
    with pytest.raises(BootstrapError, match="EMU_PMI_TIMEOUT_S"):
        attach({"PMI_FD": "5", "EMU_PMI_TIMEOUT_S": "soon"})
    with pytest.raises(BootstrapError, match="positive"):
        attach({"PMI_FD": "5", "EMU_PMI_TIMEOUT_S": "0"})


def test_an_unreachable_manager_is_a_bootstrap_error() -> None:
    with pytest.raises(BootstrapError, match="cannot reach the process manager"):
        attach({"PMI_FD": "987654", "PMI_RANK": "0", "PMI_SIZE": "1"})


def test_every_rank_derives_the_same_job_id() -> None:
    assert job_id_of("kvs_4242_0") == job_id_of("kvs_4242_0")
    assert job_id_of("kvs_4242_0") != job_id_of("kvs_4243_0")
    assert job_id_of("kvs_4242_0").isalnum()


@pytest.mark.parametrize(
    ("mapping", "nodes"),
    [
        ("(vector,(0,2,2))", 2),
        ("(vector,(0,2,1),(0,2,1))", 2),
        ("(vector,(0,2,2),(2,2,4))", 4),
        ("(vector,(0,4096,256))", 4096),
        ("(vector,(0,1,16))", 1),
        ("", None),
        ("garbage", None),
    ],
)
def test_node_count_of_a_process_mapping(mapping: str, nodes: int | None) -> None:
    assert node_count(mapping) == nodes


def test_the_listen_address() -> None:
    listen = bootstrap._listen_host
    assert listen({}, "(vector,(0,1,4))") == "127.0.0.1"
    assert listen({}, "") == "127.0.0.1"
    assert listen({"EMU_NIC_LISTEN": "198.18.0.7"}, "(vector,(0,2,2))") == "198.18.0.7"


def test_a_job_on_several_nodes_listens_where_the_hosts_name_resolves(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bootstrap.socket, "gethostname", lambda: "n1")
    monkeypatch.setattr(bootstrap.socket, "gethostbyname", lambda name: "198.18.0.5")
    assert bootstrap._listen_host({}, "(vector,(0,2,2))") == "198.18.0.5"
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(bootstrap.socket, "gethostbyname", lambda name: "127.0.1.1")
    assert bootstrap._listen_host({}, "(vector,(0,2,2))") == "127.0.1.1"
    assert "set EMU_NIC_LISTEN" in capsys.readouterr().err

    def unknown(name: str) -> str:
        raise OSError("no such host")

    monkeypatch.setattr(bootstrap.socket, "gethostbyname", unknown)
    with pytest.raises(BootstrapError, match="set EMU_NIC_LISTEN"):
        bootstrap._listen_host({}, "(vector,(0,2,2))")
