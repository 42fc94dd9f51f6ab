"""Fixtures the integration tests share: ``job``, an emurun job of its own (job id, TMPDIR)
torn down after the test (`tests.integration.test_emurun.Job`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from tests.integration.test_emurun import Job

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture
def job() -> Iterator[Job]:
    j = Job()
    yield j
    j.teardown()
