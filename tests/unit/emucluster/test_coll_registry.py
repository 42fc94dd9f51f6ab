"""The collective registry (names, environment defaults, errors), block framing, and purity."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from emucluster import coll
from emucluster.coll import payload, registry
from emucluster.coll.binomial import bcast_binomial
from emucluster.coll.context import TAG_LIMIT, simulate
from emucluster.coll.tags import Tag
from tests.unit.test_purity import impurities

COLL_DIR = pathlib.Path(coll.__file__).parent


def test_every_operation_has_its_baseline_registered() -> None:
    assert set(coll.BASELINES) == set(coll.DEFAULTS) == set(coll.OPERATIONS) == set(coll.ARITY)
    for operation in coll.OPERATIONS:
        names = coll.choices(operation)
        assert names[0] == coll.BASELINES[operation]
        assert coll.DEFAULTS[operation] in names
        assert coll.get(operation) is coll.get(operation, coll.DEFAULTS[operation])


def test_defaults_are_the_baselines_but_barrier_bcast_and_reduce() -> None:
    differ = {op for op in coll.OPERATIONS if coll.DEFAULTS[op] != coll.BASELINES[op]}
    assert differ == {"barrier", "bcast", "reduce"}
    assert coll.get("bcast") is coll.get("bcast", "auto")
    assert coll.get("barrier") is coll.get("barrier", "auto")
    assert coll.get("reduce") is coll.get("reduce", "auto")
    # EMU_BARRIER still picks any of them
    chosen = coll.get("barrier", environ={"EMU_BARRIER": "dissemination"})
    assert chosen is coll.get("barrier", "dissemination")


def test_registered_names() -> None:
    assert coll.choices("bcast") == ("binomial", "auto", "nic-mcast", "nicvm")
    assert coll.choices("reduce") == ("binomial", "app-bypass", "auto", "linear")
    assert coll.choices("barrier") == ("dissemination", "auto", "nic-mcast", "tree")
    assert coll.choices("allreduce") == ("recursive-doubling", "reduce-bcast")
    assert coll.choices("allgather") == ("recursive-doubling", "ring")
    assert coll.choices("alltoall") == ("pairwise", "scattered")
    assert coll.choices("scan") == ("recursive-doubling", "linear")
    assert coll.choices("exscan") == ("recursive-doubling", "linear")
    assert coll.get("bcast", "binomial") is bcast_binomial


def test_environment_picks_the_default_and_explicit_choice_wins() -> None:
    environ = {"EMU_ALLREDUCE": " Reduce-Bcast ", "EMU_BCAST": ""}
    assert coll.env_var("allreduce") == "EMU_ALLREDUCE"
    assert coll.get("allreduce", environ=environ) is coll.get("allreduce", "reduce-bcast")
    assert coll.get("allreduce", "recursive-doubling", environ=environ) is coll.get(
        "allreduce", "recursive-doubling"
    )
    assert coll.get("bcast", environ=environ) is coll.get("bcast")  # empty means unset


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(coll.UnknownAlgorithmError, match="choices: recursive-doubling, ring"):
        coll.get("allgather", "bruck")
    with pytest.raises(coll.UnknownAlgorithmError, match=r"\(from EMU_REDUCE\)") as info:
        coll.get("reduce", environ={"EMU_REDUCE": "tree"})
    assert (info.value.operation, info.value.name, info.value.choices) == (
        "reduce",
        "tree",
        ("binomial", "app-bypass", "auto", "linear"),
    )
    assert not info.value.reserved
    with pytest.raises(coll.UnknownAlgorithmError, match="operations: barrier, bcast"):
        coll.get("reduce_scatter")
    with pytest.raises(ValueError, match="unknown"):  # it is a ValueError
        coll.choices("nope")


def test_reserved_offload_names_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(coll.RESERVED, "reduce", frozenset({"nic-reduce"}))
    with pytest.raises(coll.UnknownAlgorithmError, match="reserved for an offload") as info:
        coll.get("reduce", "nic-reduce")
    assert info.value.reserved


def test_registering_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    coll.choices("bcast")  # the offloads register on the first lookup: before the swap
    table = {k: v for k, v in registry._ALGORITHMS["bcast"].items() if k != "nic-mcast"}
    monkeypatch.setitem(registry._ALGORITHMS, "bcast", table)

    def bcast_flat(ctx, data, root):
        if ctx.rank == root:
            yield [ctx.isend(data, r, 0) for r in range(ctx.size) if r != root]
            return data
        request = ctx.irecv(root, 0)
        yield [request]
        return request.result

    coll.register("bcast", "nic-mcast", bcast_flat)  # a reserved name, now provided
    assert coll.choices("bcast") == ("binomial", "auto", "nic-mcast", "nicvm")
    algorithm = coll.get("bcast", environ={"EMU_BCAST": "nic-mcast"})
    results = simulate(algorithm, 5, lambda r: (b"hi" if r == 2 else None, 2))
    assert results == [b"hi"] * 5
    with pytest.raises(ValueError, match="already registered"):
        coll.register("bcast", "nic-mcast", bcast_flat)
    coll.register("bcast", "nic-mcast", bcast_binomial, replace=True)
    assert coll.get("bcast", "nic-mcast") is bcast_binomial


def test_register_checks_names_and_arity() -> None:
    with pytest.raises(coll.UnknownAlgorithmError):
        coll.register("broadcast", "x", bcast_binomial)
    with pytest.raises(ValueError, match="lowercase"):
        coll.register("bcast", "Flat", bcast_binomial)
    with pytest.raises(TypeError, match="must take 4 positional arguments"):
        coll.register("reduce", "wrong", bcast_binomial)
    assert "wrong" not in coll.choices("reduce")


def test_baselines_also_run_on_the_contract_simulator() -> None:
    # collctx.simulate (the MPI helper's round-robin runner) agrees with collsim.
    assert simulate(coll.get("bcast"), 6, lambda r: (b"x" if r == 3 else None, 3)) == [b"x"] * 6
    assert simulate(coll.get("alltoall"), 3, lambda r: ([bytes([r, j]) for j in range(3)],)) == [
        [bytes([i, j]) for i in range(3)] for j in range(3)
    ]


def test_tags_fit_the_contract() -> None:
    values = [tag.value for tag in Tag]
    assert len(set(values)) == len(values)
    assert all(0 <= v < TAG_LIMIT for v in values)


# -- framing ---------------------------------------------------------------------------------


@given(st.lists(st.binary(max_size=40), max_size=12), st.lists(st.binary(max_size=40), max_size=5))
def test_blocks_round_trip_and_concatenate(blocks: list[bytes], more: list[bytes]) -> None:
    packed = payload.pack_blocks(blocks)
    assert payload.unpack_blocks(packed) == blocks
    assert payload.unpack_blocks(packed, len(blocks)) == blocks
    assert payload.unpack_blocks(packed + payload.pack_blocks(more)) == blocks + more


@given(st.lists(st.binary(min_size=1, max_size=20), min_size=1, max_size=6), st.data())
def test_truncated_blocks_raise_value_error(blocks: list[bytes], data: st.DataObject) -> None:
    packed = payload.pack_blocks(blocks)
    cut = data.draw(st.integers(1, len(packed) - 1))
    truncated = packed[:cut]
    try:
        got = payload.unpack_blocks(truncated, len(blocks))
    except ValueError:
        return
    pytest.fail(f"truncated payload decoded as {got!r}")


def test_block_count_mismatch_raises() -> None:
    with pytest.raises(ValueError, match="expected 3 blocks, payload holds 2"):
        payload.unpack_blocks(payload.pack_blocks([b"a", b""]), 3)


def test_received_without_result_is_an_engine_bug() -> None:
    class Pending:
        done = True
        result = None

    with pytest.raises(RuntimeError, match="progress engine bug"):
        payload.received(Pending())


# -- sans-IO -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(p.name for p in COLL_DIR.glob("*.py")))
def test_coll_modules_are_pure(path: str) -> None:
    source = (COLL_DIR / path).read_text(encoding="utf-8")
    assert impurities(source, path) == [], f"coll/{path} breaks STYLE §2"
    assert source.startswith('"""'), f"coll/{path} has no module docstring"
