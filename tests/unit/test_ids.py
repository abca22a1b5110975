"""Deterministic identities: the same input always names the same thing, tenants never meet."""

from __future__ import annotations

import hashlib
import uuid

from shared.ids import content_hash, default_document_id, document_key, memory_id


def test_document_key_is_deterministic_uuid() -> None:
    first = document_key("alice", "notes/today.md")
    second = document_key("alice", "notes/today.md")

    assert first == second
    assert uuid.UUID(first).version == 5


def test_memory_id_is_deterministic_uuid() -> None:
    assert memory_id("alice", "doc-1", 3) == memory_id("alice", "doc-1", 3)
    assert uuid.UUID(memory_id("alice", "doc-1", 3)).version == 5


def test_same_document_id_of_two_tenants_gets_different_keys_and_memory_ids() -> None:
    # Given two tenants that both use the document id "doc-1"
    # When their ids are derived
    alice_key, bob_key = document_key("alice", "doc-1"), document_key("bob", "doc-1")
    alice_memory, bob_memory = memory_id("alice", "doc-1", 0), memory_id("bob", "doc-1", 0)

    # Then nothing they store can collide
    assert alice_key != bob_key
    assert alice_memory != bob_memory


def test_tenant_and_document_boundaries_cannot_be_shifted() -> None:
    # "ab" + "c" and "a" + "bc" join to the same letters: the separator keeps them apart.
    assert document_key("ab", "c") != document_key("a", "bc")
    assert memory_id("ab", "c", 0) != memory_id("a", "bc", 0)
    assert memory_id("a", "b1", 0) != memory_id("a", "b", 10)


def test_each_chunk_index_gets_its_own_memory_id() -> None:
    ids = {memory_id("alice", "doc-1", index) for index in range(100)}

    assert len(ids) == 100


def test_document_key_and_memory_ids_live_in_different_namespaces() -> None:
    assert document_key("alice", "doc-1") not in {memory_id("alice", "doc-1", i) for i in range(10)}


def test_content_hash_is_stable_sha256_of_utf8() -> None:
    text = "Zoë met 東京 😀"

    assert content_hash(text) == content_hash(text)
    assert content_hash(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert content_hash(text) != content_hash(text + " ")
    assert content_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_default_document_id_is_named_by_content() -> None:
    text = "Posted without an id."

    document_id = default_document_id(text)

    assert document_id == "sha256-" + content_hash(text)[:32]
    assert len(document_id) == len("sha256-") + 32
    assert default_document_id(text) == document_id
    assert default_document_id(text + "!") != document_id
