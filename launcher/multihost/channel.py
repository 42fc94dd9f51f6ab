"""One control connection over a trio stream: framed messages out (one sender at a time),
decoded messages in, and the two halves of the handshake (:mod:`launcher.control`).

Invariants: sends never interleave; ``receive`` returns None once at end of stream (or a
broken connection), and raises ControlError for a bad frame; a handshake that fails raises
ControlError and sends nothing that depends on the token.
"""

from __future__ import annotations

import hmac
import secrets
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from launcher import control
from launcher.control import ControlError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Channel", "accept_agent", "greet_emurun"]

_CHUNK = 65536


class Channel:
    """Messages over one stream."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self._decoder = control.FrameDecoder()
        self._inbox: deque[control.Message] = deque()
        self._send_lock = trio.Lock()
        self.closed = False
        self.last_heard = trio.current_time()

    async def send(self, message: control.Message) -> bool:
        """Send one message; False if the connection is gone."""
        data = control.encode_message(message)
        async with self._send_lock:
            if self.closed:
                return False
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self.closed = True
                return False
        return True

    async def receive(self) -> control.Message | None:
        """The next message; None at end of stream."""
        while not self._inbox:
            try:
                data = await self.stream.receive_some(_CHUNK)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                return None
            self.last_heard = trio.current_time()
            self._inbox.extend(self._decoder.feed(bytes(data)))
        return self._inbox.popleft()

    async def aclose(self) -> None:
        """Close the stream (idempotent)."""
        async with self._send_lock:
            self.closed = True
        await self.stream.aclose()


async def _expect(channel: Channel, kind: type[Any], limit_s: float) -> control.Message:
    with trio.move_on_after(limit_s):
        message = await channel.receive()
        if message is None:
            raise ControlError("connection closed during the handshake")
        if not isinstance(message, kind):
            raise ControlError(f"handshake: expected {kind.TAG}, got {type(message).TAG}")
        got: control.Message = message
        return got
    raise ControlError(f"handshake: no {kind.TAG} within {limit_s:g} s")


async def accept_agent(channel: Channel, token: bytes, limit_s: float) -> control.Hello:
    """emurun's half: challenge, check the agent's mac, prove our own. ControlError if the
    agent does not hold ``token`` (it gets nothing but the challenge)."""
    nonce = secrets.token_bytes(control.NONCE_BYTES)
    await channel.send(control.Challenge(control.VERSION, nonce))
    hello = await _expect(channel, control.Hello, limit_s)
    assert isinstance(hello, control.Hello)
    if hello.version != control.VERSION:
        raise ControlError(f"agent speaks version {hello.version}, emurun {control.VERSION}")
    if len(hello.nonce) != control.NONCE_BYTES or not hmac.compare_digest(
        hello.mac, control.hello_mac(token, nonce, hello.nonce)
    ):
        raise ControlError(f"agent {hello.name!r} (pid {hello.pid}) has the wrong token")
    await channel.send(control.Welcome(control.welcome_mac(token, nonce, hello.nonce)))
    return hello


async def greet_emurun(
    channel: Channel,
    token: bytes,
    limit_s: float,
    hello: Callable[[bytes, bytes], control.Hello],
) -> None:
    """The agent's half: answer the challenge with ``hello(nonce, mac)``, then check that
    emurun holds the token too. ControlError otherwise."""
    challenge = await _expect(channel, control.Challenge, limit_s)
    assert isinstance(challenge, control.Challenge)
    if challenge.version != control.VERSION:
        raise ControlError(f"emurun speaks version {challenge.version}, agent {control.VERSION}")
    nonce = secrets.token_bytes(control.NONCE_BYTES)
    await channel.send(hello(nonce, control.hello_mac(token, challenge.nonce, nonce)))
    welcome = await _expect(channel, control.Welcome, limit_s)
    assert isinstance(welcome, control.Welcome)
    if not hmac.compare_digest(welcome.mac, control.welcome_mac(token, challenge.nonce, nonce)):
        raise ControlError("emurun could not prove it holds the token")
