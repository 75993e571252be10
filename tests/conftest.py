"""Settings shared by every test tier.

Hypothesis profiles for the property tests (``tests/unit/test_properties_*.py``):

* ``dev`` (the default): 60 examples per property, random seeds, so local runs keep exploring;
* ``ci`` (loaded when the environment has ``CI``): the same budget, derandomized and without
  the example database, so a CI run is reproducible and a red build stays red on a re-run;
* ``thorough``: 1,000 examples per property, for a long local hunt
  (``HYPOTHESIS_PROFILE=thorough pytest tests/unit -k properties``).

``HYPOTHESIS_PROFILE`` overrides the choice. No deadline: the suite runs on small shared
machines, where a slow example is not a failure.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def _profile(name: str, max_examples: int, *, ci: bool = False) -> None:
    settings.register_profile(
        name,
        max_examples=max_examples,
        derandomize=ci,
        database=None if ci else settings.default.database,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )


_profile("dev", 60)
_profile("ci", 60, ci=True)
_profile("thorough", 1000)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)
