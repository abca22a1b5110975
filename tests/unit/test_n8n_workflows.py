"""The n8n workflows of docs/n8n/ import as they are (checked with n8n itself by ops/n8n-check) and
post what the API takes: their nodes are wired, their credentials are in the template with no
secret, and the bodies they send, as n8n 2.40.7 sent them, validate as ``POST /api/documents``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from producers.http.n8n_items import N8nItem
from producers.http.routes.documents import IngestBody
from shared.models import DocumentBody, SearchBody

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "n8n"
WORKFLOWS = sorted((DOCS / "workflows").glob("engram-*.json"))
RECORDED = json.loads((Path(__file__).parent / "data" / "n8n-requests.json").read_text())
INGEST = TypeAdapter(IngestBody)


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def nodes_of(workflow: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["name"]: node for node in workflow["nodes"]}


def examples_of(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    """The example documents a workflow's "Documents" Code node sends when run by hand."""
    code = nodes_of(workflow)["Documents"]["parameters"]["jsCode"]
    match = re.search(r"const examples = (\[.*?\n\]);", code, re.S)
    assert match is not None, code
    examples: list[dict[str, Any]] = json.loads(match.group(1))
    return examples


def test_the_three_workflows_and_the_credentials_template_are_there() -> None:
    assert [path.name for path in WORKFLOWS] == [
        "engram-ingest-signed.json",
        "engram-ingest.json",
        "engram-search.json",
    ]
    assert (DOCS / "credentials.template.json").is_file()


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda path: path.name)
def test_a_workflow_is_wired_and_starts_by_hand_or_by_webhook(path: Path) -> None:
    workflow = load(path)
    nodes = nodes_of(workflow)
    assert len(nodes) == len(workflow["nodes"]), "node names are unique"
    assert re.fullmatch(r"[A-Za-z0-9]{16}", workflow["id"]), "an id n8n execute --id can name"
    for source, outputs in workflow["connections"].items():
        assert source in nodes
        for output in outputs["main"]:
            assert all(link["node"] in nodes for link in output)
    types = {node["type"] for node in nodes.values()}
    assert {"n8n-nodes-base.manualTrigger", "n8n-nodes-base.webhook"} <= types
    # every node but the triggers is reached from both triggers' first node
    reached = {link["node"] for outputs in workflow["connections"].values() for link in outputs["main"][0]}
    assert reached == set(nodes) - {"Run by hand", "Webhook"}


def test_credentials_are_templates_with_no_secret_and_match_the_nodes() -> None:
    credentials = json.loads((DOCS / "credentials.template.json").read_text())
    by_id = {credential["id"]: credential for credential in credentials}
    assert by_id["EngramApiKey0001"]["data"] == {"name": "X-API-Key", "value": "REPLACE_WITH_API_KEY"}
    assert by_id["EngramSigning001"]["data"] == {"hmacSecret": "REPLACE_WITH_SIGNING_SECRET"}
    used = 0
    for path in WORKFLOWS:
        text = path.read_text()
        assert "egk_" not in text
        for node in load(path)["nodes"]:
            for kind, named in node.get("credentials", {}).items():
                assert by_id[named["id"]]["type"] == kind
                assert by_id[named["id"]]["name"] == named["name"]
                used += 1
    assert used == 3


def test_the_api_key_workflow_posts_n8n_items_the_api_takes() -> None:
    workflow = load(DOCS / "workflows" / "engram-ingest.json")
    post = nodes_of(workflow)["Post to Engram"]
    assert post["parameters"]["url"].endswith("/api/documents")
    assert post["parameters"]["jsonBody"] == "={{ JSON.stringify($input.all()) }}"
    assert post["executeOnce"] is True
    # What n8n sent for it: its examples as n8n items, which validate as documents
    sent = json.loads(RECORDED["engram-ingest.json"])
    assert [item["json"] for item in sent] == examples_of(workflow)
    body = INGEST.validate_python(sent)
    assert all(isinstance(item, N8nItem) for item in body)


def test_the_signed_workflow_signs_the_bytes_it_sends_and_they_validate() -> None:
    workflow = load(DOCS / "workflows" / "engram-ingest-signed.json")
    nodes = nodes_of(workflow)
    sign, post = nodes["Sign (HMAC-SHA256)"]["parameters"], nodes["Post signed to Engram"]["parameters"]
    assert (sign["action"], sign["type"], sign["encoding"]) == ("hmac", "SHA256", "hex")
    assert sign["value"] == "={{ $json.toSign }}"
    assert "timestamp + '.' + body" in nodes["Body to sign"]["parameters"]["jsCode"]
    # the body goes raw, as signed: a JSON body would be serialised again by n8n
    assert (post["contentType"], post["body"]) == ("raw", "={{ $json.body }}")
    headers = {header["name"]: header["value"] for header in post["headerParameters"]["parameters"]}
    assert headers == {
        "X-Engram-Key-Id": "={{ $json.keyId }}",
        "X-Engram-Timestamp": "={{ $json.timestamp }}",
        "X-Engram-Signature": "=v1={{ $json.signature }}",
    }
    assert "retryOnFail" not in nodes["Post signed to Engram"], "a resent signed request is a replay"
    sent = json.loads(RECORDED["engram-ingest-signed.json"])
    assert [item["json"] for item in sent] == examples_of(workflow)
    assert all(isinstance(item, N8nItem) for item in INGEST.validate_python(sent))


def test_every_example_document_is_valid_alone() -> None:
    for path in (DOCS / "workflows" / "engram-ingest.json", DOCS / "workflows" / "engram-ingest-signed.json"):
        for example in examples_of(load(path)):
            DocumentBody.model_validate(example)


def test_the_search_workflow_sends_a_search_body() -> None:
    nodes = nodes_of(load(DOCS / "workflows" / "engram-search.json"))
    search = nodes["Search Engram"]["parameters"]
    assert search["url"].endswith("/api/memory/semantic-search")
    assert search["jsonBody"] == "={{ JSON.stringify({ query: $json.query, top_k: $json.top_k }) }}"
    code = nodes["Query"]["parameters"]["jsCode"]
    match = re.search(r"asked \?\? '([^']+)', top_k: (\d+)", code)
    assert match is not None
    SearchBody.model_validate({"query": match.group(1), "top_k": int(match.group(2))})
    assert nodes["One item per memory"]["parameters"]["fieldToSplitOut"] == "results"
