"""Repository-wide pytest configuration.

The anyio pytest plugin runs ``@pytest.mark.anyio`` tests once per backend listed here. The
core (runtime, testing kit) must work on asyncio and trio; plugin test folders may narrow this
with their own ``anyio_backend`` fixture.
"""

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
