"""A forked child's fd placement (launcher/forkserver/child.py), in a real fork."""

from __future__ import annotations

import os

from launcher.forkserver.child import _place_fds

WAIT_S = 30.0


def _read_all(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, 4096):
        out += chunk
    os.close(fd)
    return out


def test_place_fds_keeps_exactly_the_targets() -> None:
    pipes = [os.pipe() for _ in range(4)]  # stand-ins for stdin, stdout, stderr, a lifeline
    extra = os.open(os.devnull, os.O_RDONLY)  # must be closed in the child
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            fds = [w for _, w in pipes]
            _place_fds(fds, [0, 1, 2, 40])  # fd 0: closerange(0, 0) once closed them all
            open_fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
            os.write(1, f"{open_fds}\n".encode())
            os.write(0, b"in\n")
            os.write(2, b"err\n")
            os.write(40, b"life\n")
        finally:
            os._exit(0)
    for _, w in pipes:
        os.close(w)
    os.close(extra)
    zero, out, err, life = (_read_all(r) for r, _ in pipes)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    listed = [int(n) for n in out.decode().strip("[]\n").split(", ")]
    assert listed == [0, 1, 2, 3, 40]  # 3: listdir's own
    assert zero == b"in\n"
    assert err == b"err\n"
    assert life == b"life\n"
