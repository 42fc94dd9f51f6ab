"""The control handshake over an in-memory stream pair: the right token on both sides
connects; a wrong token on either side is refused without the other side obeying."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from launcher import control
from launcher.multihost.channel import Channel, accept_agent, greet_emurun


def hello(nonce: bytes, mac: bytes) -> control.Hello:
    return control.Hello(control.VERSION, 0, "h1", "vm", 42, 2, 2, "198.18.7.11", nonce, mac)


async def handshake(emurun_token: bytes, agent_token: bytes) -> tuple[object, object]:
    left, right = trio.testing.memory_stream_pair()
    results: dict[str, object] = {}

    async def emurun_side() -> None:
        try:
            results["emurun"] = await accept_agent(Channel(left), emurun_token, 5.0)
        except control.ControlError as exc:
            results["emurun"] = exc
            await left.aclose()

    async def agent_side() -> None:
        try:
            await greet_emurun(Channel(right), agent_token, 5.0, hello)
            results["agent"] = "welcomed"
        except control.ControlError as exc:
            results["agent"] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(emurun_side)
        nursery.start_soon(agent_side)
    return results["emurun"], results["agent"]


async def test_the_same_token_connects() -> None:
    got, agent = await handshake(b"tok", b"tok")
    assert isinstance(got, control.Hello)
    assert got.name == "h1"
    assert agent == "welcomed"


async def test_a_wrong_token_is_refused() -> None:
    got, agent = await handshake(b"right", b"wrong")
    assert isinstance(got, control.ControlError)
    assert "wrong token" in str(got)
    assert isinstance(agent, control.ControlError)  # never welcomed


async def test_an_impostor_emurun_gets_no_obedience() -> None:
    left, right = trio.testing.memory_stream_pair()
    impostor = Channel(left)

    async def fake_emurun() -> None:
        await impostor.send(control.Challenge(control.VERSION, b"n" * 16))
        await impostor.receive()  # the Hello
        await impostor.send(control.Welcome(b"\0" * 32))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fake_emurun)
        with pytest.raises(control.ControlError, match="could not prove"):
            await greet_emurun(Channel(right), b"tok", 5.0, hello)


async def test_a_silent_peer_times_out() -> None:
    _left, right = trio.testing.memory_stream_pair()
    with pytest.raises(control.ControlError, match="no challenge within"):
        await greet_emurun(Channel(right), b"tok", 0.05, hello)
