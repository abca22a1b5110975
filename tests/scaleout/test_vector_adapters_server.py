"""The vector adapter contract (tests/unit/vector_contract.py) on a real Qdrant server: what the
embedded engines are held to holds on the server too, through its payload indexes and its HTTP
errors. Each test has a collection prefix of its own, its collections dropped after it; then what
only a server does: an API key it checks, an address that may not answer.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from shared.errors import ConfigurationError, ServiceUnavailable
from shared.settings import Settings
from shared.stores.vectors import connect_vectors
from tests.scaleout.qdrant_server import QdrantServer
from tests.unit.vector_contract import DIM, MODEL, Opened, VectorAdapterContract, point

pytestmark = pytest.mark.integration


class Served(Opened):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        super().__init__(lambda: connect_vectors(settings))


@pytest.fixture
def opened(qdrant_server: QdrantServer) -> Iterator[Served]:
    found = Served(qdrant_server.settings())
    yield found
    client = found.connection.client()
    for collection in client.get_collections().collections:
        if collection.name.startswith(f"{found.settings.qdrant_collection_prefix}_"):
            client.delete_collection(collection.name)
    found.connection.close()


class TestServer(VectorAdapterContract):
    """The contract on the server."""


def test_a_wrong_api_key_is_a_configuration_error_naming_the_key(opened: Served) -> None:
    wrong = opened.settings.model_copy(update={"qdrant_api_key": SecretStr("not-the-key")})

    with pytest.raises(ConfigurationError, match="ENGRAM_QDRANT_API_KEY"):
        connect_vectors(wrong).store(MODEL, DIM).upsert([point(1, 1)])


def test_a_server_that_does_not_answer_is_unavailable(opened: Served) -> None:
    gone = opened.settings.model_copy(update={"qdrant_url": "http://127.0.0.1:9"})

    with pytest.raises(ServiceUnavailable) as raised:
        connect_vectors(gone).store(MODEL, DIM).count()
    assert raised.value.service == "qdrant"
