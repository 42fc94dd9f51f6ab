"""Run a GRIM program under emurun and collect each rank's RESULT line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.mpirun import Result, mpirun

GRIM = Path(__file__).parent / "grim_programs"


def run_grim(
    np_: int, program: str, *args: str, emurun_args: tuple[str, ...] = (), timeout: float = 150.0
) -> tuple[Result, list[dict[str, object]]]:
    """``emurun -np N grim_programs/PROGRAM``; the RESULT records sorted by rank."""
    result = mpirun(np_, GRIM / program, *args, emurun_args=emurun_args, timeout=timeout)
    records = [json.loads(line[len("RESULT ") :]) for line in result.lines("RESULT ")]
    records.sort(key=lambda r: int(r["rank"]))
    return result, records
