"""Settings every test shares.

Hypothesis: the machines this suite runs on have 2 cores shared with real-process tests, so
how fast an example is drawn or run says nothing about the code under test: no deadline and no
too-slow health check (tests assert outcomes, never timings). Each test's own ``@settings``
still sets its example count.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("emucluster", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("emucluster")
