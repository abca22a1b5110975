"""``engram ingest DIR --sync``: a tenant's documents from one folder kept in step with it.

Every document read from the folder is recorded with the folder as its ``source``
(``folder:`` and the folder's resolved absolute path), so a sync forgets only documents of the
same tenant that came from the same folder: never another folder's, nor the webhook's, nor
another tenant's. A run reads the whole folder, then ingests what is new or changed (unchanged
documents are skipped before any queue work, ``EngramClient.ingest``), waits for it, and only
then forgets the documents whose files are gone, through the delete path (both stores). So a run
cut short leaves each document as it was or as the folder says, never missing.

A file that cannot be read (not UTF-8, a bad JSONL line, no permission) is reported and its
documents are left as they are: a text file's document (its id is its path) is not forgotten,
and since a JSONL file's ids are unknown until it is read, one unreadable JSONL file means this
run forgets nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from producers.cli.files import JSONL_SUFFIXES, read_file, readable
from shared.errors import InvalidInput
from shared.models import DocumentIn

SOURCE_MAX = 1024


def folder_source(folder: Path) -> str:
    """The source a folder's documents are recorded with."""
    source = "folder:" + str(folder.resolve())
    if len(source) > SOURCE_MAX:
        raise InvalidInput(f"{folder}: its path is too long to be a source ({len(source)} characters)")
    return source


@dataclass(slots=True)
class FolderRead:
    documents: list[DocumentIn] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    """(file, why) of each file that could not be read."""
    kept: set[str] = field(default_factory=set)
    """Ids never forgotten this run: those of unreadable text files."""
    forget_nothing: bool = False
    """An unreadable JSONL file: its ids are unknown, so nothing is forgotten."""


def read_folder(folder: Path, user_id: str, defaults: dict[str, Any]) -> FolderRead:
    """Every readable file of ``folder`` as documents of ``user_id`` from this folder."""
    if not folder.is_dir():
        raise InvalidInput(f"{folder}: --sync takes one folder")
    source = folder_source(folder)
    read = FolderRead()
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and readable(p)):
        name = file.relative_to(folder).as_posix()
        try:
            documents = read_file(file, name, {**defaults, "user_id": user_id})
            strangers = {d.user_id for d in documents} - {user_id}
            if strangers:
                raise InvalidInput(f"{file}: names tenants other than {user_id!r} ({len(strangers)})")
        except (InvalidInput, OSError) as exc:
            read.unreadable.append((name, str(exc)))
            if file.suffix.lower() in JSONL_SUFFIXES:
                read.forget_nothing = True
            else:
                read.kept.add(name)
            continue
        read.documents.extend(d.model_copy(update={"source": source}) for d in documents)
    return read


@dataclass(slots=True)
class SyncPlan:
    added: list[DocumentIn]
    changed: list[DocumentIn]
    unchanged: list[DocumentIn]
    forget: list[str]
    """Ids of the tenant's documents from this folder whose files are gone."""


def plan(read: FolderRead, changes: list[str], stored_ids: list[str], force: bool) -> SyncPlan:
    """What a sync does, from the folder as read, each document's change (new, changed,
    unchanged) and the ids stored from this folder."""
    by_change: dict[str, list[DocumentIn]] = {"new": [], "changed": [], "unchanged": []}
    for document, change in zip(read.documents, changes, strict=True):
        by_change["changed" if force and change == "unchanged" else change].append(document)
    present = {d.document_id for d in read.documents}
    forget = [] if read.forget_nothing else [i for i in stored_ids if i not in present and i not in read.kept]
    return SyncPlan(by_change["new"], by_change["changed"], by_change["unchanged"], forget)


def to_forget(todo: SyncPlan, failed: int) -> list[str]:
    """What a run forgets once its new and changed documents are finished: nothing when one of them
    failed (a file renamed whose new document failed would otherwise lose its old one too)."""
    return [] if failed else todo.forget
