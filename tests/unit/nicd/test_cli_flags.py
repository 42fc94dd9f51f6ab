"""nicd's --host-coalesce-us and --ack-delay-ms reach its config; their defaults are the
config's own."""

from __future__ import annotations

from nicd.__main__ import build_parser, config_from_args
from nicd.config import CoalesceConfig, TransportConfig

BASE = ["--node-id", "0", "--run-dir", "/r"]


def test_defaults_are_the_configs() -> None:
    config = config_from_args(build_parser().parse_args(BASE))
    assert config.host_coalesce == CoalesceConfig()
    assert config.transport.ack_delay_s == TransportConfig().ack_delay_s


def test_flags_set_hold_and_ack_delay() -> None:
    argv = [*BASE, "--host-coalesce-us", "250", "--ack-delay-ms", "0.5"]
    config = config_from_args(build_parser().parse_args(argv))
    assert abs(config.host_coalesce.hold_s - 250e-6) < 1e-12
    assert abs(config.transport.ack_delay_s - 0.0005) < 1e-12


def test_zero_and_negative_turn_holding_off() -> None:
    for value in ("0", "-5"):
        argv = [*BASE, "--host-coalesce-us", value, "--ack-delay-ms", value]
        config = config_from_args(build_parser().parse_args(argv))
        assert config.host_coalesce.hold_s == 0.0
        assert config.transport.ack_delay_s == 0.0
