"""Replays every committed fuzz input through its target, in plain Python (no atheris).

The corpus (`tests/fuzz/corpus/<target>/`) is what `python -m tests.fuzz.run` grew and
minimised, plus the inputs of the bugs it found: each must still be refused with its decoder's
typed error or round-trip (see `tests/fuzz/targets.py`). Seconds, so it runs in the normal suite.
"""

from __future__ import annotations

import pytest

from tests.fuzz.run import CORPUS, MAX_LEN
from tests.fuzz.targets import TARGETS

MAX_FILES = 400
MAX_BYTES = 400 * 1024


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_corpus_input_is_refused_with_the_typed_error_or_round_trips(name: str) -> None:
    files = sorted((CORPUS / name).iterdir())
    assert files, f"no corpus for {name}: run python -m tests.fuzz.run --target {name} --seed"
    for path in files:
        try:
            TARGETS[name](path.read_bytes())
        except BaseException as exc:
            raise AssertionError(f"{name}: corpus input {path.name} fails") from exc


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_corpus_stays_small(name: str) -> None:
    files = list((CORPUS / name).iterdir())
    assert len(files) <= MAX_FILES
    assert sum(f.stat().st_size for f in files) <= MAX_BYTES
    assert max(f.stat().st_size for f in files) <= max(MAX_LEN[name], 1024)


def test_the_corpus_holds_one_folder_per_target() -> None:
    assert sorted(p.name for p in CORPUS.iterdir()) == sorted(TARGETS)
