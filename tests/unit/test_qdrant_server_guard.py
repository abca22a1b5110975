"""The server adapter's version guard, against a stand-in HTTP server that says which version it
is: a server without the conditional upsert and collection metadata the adapter writes through is
refused at the connection as a configuration error, not met later as a failed write."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import SecretStr

from shared.errors import ConfigurationError
from shared.settings import Settings
from shared.stores.vectors import connect_vectors


def _server(version: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/":
                body: object = {"title": "qdrant - vector search engine", "version": version}
            else:  # GET /collections
                body = {"result": {"collections": []}, "status": "ok", "time": 0.0}
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


@pytest.fixture
def serving(request: pytest.FixtureRequest) -> Iterator[Settings]:
    server = _server(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Settings(
        _env_file=None,
        qdrant_url=f"http://127.0.0.1:{server.server_address[1]}",
        qdrant_api_key=SecretStr("test-key"),
    )
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("serving", ["1.15.2", "0.11.0", "2.0.0"], indirect=True)
def test_a_server_without_what_the_adapter_uses_is_refused_naming_its_version(serving: Settings) -> None:
    connection = connect_vectors(serving)

    with pytest.raises(ConfigurationError, match=r"Engram needs 1\.16 or a later 1\.x"):
        connection.dimensions_of("model")


@pytest.mark.parametrize("serving", ["1.16.0", "1.18.3", "1.24.1"], indirect=True)
def test_a_server_of_a_version_apart_from_the_clients_is_used_without_a_warning(serving: Settings) -> None:
    connection = connect_vectors(serving)

    assert connection.dimensions_of("model") == []  # warnings are errors in the tests
    connection.close()
