"""A wait on a load reads only the documents not finished yet, and counts as if it read them all."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from producers.client.waiting import LoadProgress, load_state
from shared.services.refs import DocRef


class Pipeline:
    """Each document's state, moved by the test; records which documents each poll read."""

    def __init__(self, states: dict[str, str]) -> None:
        self.states = states
        self.read: list[list[str]] = []

    def progress_of(self, documents: Sequence[DocRef]) -> tuple[Counter[str], list[DocRef]]:
        self.read.append([key for key, _ in documents])
        counts = Counter(self.states[key] for key, _ in documents)
        return counts, [
            ref for ref in documents if self.states[ref[0]] not in ("done", "failed", "unchanged")
        ]


def test_finished_documents_are_read_once_and_still_counted() -> None:
    # Given four documents of one load, two already finished
    pipeline = Pipeline({"a": "done", "b": "unchanged", "c": "embedding", "d": "queued"})
    progress = LoadProgress([(key, 7) for key in "abcd"])

    # When it is polled, then one more finishes (failed) and it is polled again
    first = progress.poll(pipeline)
    pipeline.states.update(c="failed", d="writing")
    second = progress.poll(pipeline)

    # Then each poll counted the whole load, and the second read only what was unfinished
    assert first == Counter(done=1, unchanged=1, embedding=1, queued=1)
    assert second == Counter(done=1, unchanged=1, failed=1, writing=1)
    assert pipeline.read == [["a", "b", "c", "d"], ["c", "d"]]
    assert (progress.finished, progress.total) == (3, 4)


def test_polls_are_spaced_by_how_many_are_left() -> None:
    progress = LoadProgress([(f"k{n}", 1) for n in range(20_000)])
    pipeline = Pipeline({f"k{n}": "done" if n >= 10 else "queued" for n in range(20_000)})

    before = progress.pause()
    progress.poll(pipeline)

    assert before == 3.0
    assert progress.pause() < 0.51


def test_a_documents_state_in_a_load_follows_the_version_its_record_is_about() -> None:
    # A load gave its documents version 7; each record is (state, version) as Progress.states reads it
    assert load_state(7, None) == "unknown"
    assert load_state(7, ("writing", 7)) == "writing"
    assert load_state(7, ("failed", 7)) == "failed"
    assert load_state(7, ("embedding", 9)) == "done"  # a newer ingestion superseded this one
    assert load_state(7, ("done", 5)) == "queued"  # the news of this version has not arrived yet
    assert load_state(7, ("unchanged", 5)) == "unchanged"  # found stored as given: never enqueued
