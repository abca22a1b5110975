"""Settings every test shares."""

from __future__ import annotations

from hypothesis import settings

# Tests run on shared machines of two cores: a time limit per example would fail on load, not on
# behaviour. Property tests bound their work by the size of what they draw.
settings.register_profile("engram", deadline=None)
settings.load_profile("engram")

# The real stack's fixtures (Redis, Neo4j, workers, keys, the app) for tests/integration and
# tests/scaleout; none is autouse, so unit tests never reach a service.
pytest_plugins = ["tests.stack"]
