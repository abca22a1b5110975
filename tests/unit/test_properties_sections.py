"""Properties of chunking by paragraphs (``shared.paragraphs``) on the real MiniLM tokenizer: an
edit of one paragraph re-chunks no more than the bound the module proves, and every chunk stays
within its bounds in tokens and characters."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from shared.chunking import MAX_CHARS_PER_TOKEN, Chunker
from shared.paragraphs import anchor_key, paragraph_spans
from shared.settings import Settings
from shared.tokenizer import load_tokenizer

SIZE, OVERLAP = 48, 8  # small, so a few sentences cross a chunk and a long paragraph several

WORDS = st.sampled_from(
    ["garden", "river", "stone", "quiet", "market", "winter", "letter", "bridge", "東京", "naïve", "x" * 40]
)
SENTENCES = st.lists(WORDS, min_size=1, max_size=14).map(lambda words: " ".join(words).capitalize() + ".")
BODIES = st.lists(SENTENCES, min_size=1, max_size=5).map(" ".join)
LONG_BODIES = st.lists(SENTENCES, min_size=12, max_size=30).map(" ".join)
PROPERTY_SETTINGS = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(load_tokenizer(Settings(_env_file=None)), SIZE, OVERLAP, sections=True)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return load_tokenizer(Settings(_env_file=None))


@st.composite
def edits(draw: st.DrawFn) -> tuple[list[str], int, str]:
    """Paragraphs (each distinct: it begins with its own number), the index of one, and its new body:
    a sentence added, one taken away, the body replaced, or grown past a chunk."""
    bodies = draw(st.lists(BODIES | LONG_BODIES, min_size=1, max_size=30))
    at = draw(st.integers(0, len(bodies) - 1))
    old = bodies[at]
    new = draw(
        st.one_of(
            SENTENCES.map(lambda sentence: old + " " + sentence),
            st.just(old.rsplit(". ", 1)[0] + "."),
            BODIES,
            LONG_BODIES,
            SENTENCES.map(lambda sentence: sentence + " " + old),
        )
    )
    return [f"Part {i}. {body}" for i, body in enumerate(bodies)], at, f"Part {at}. {new}"


def _bound(chunker: Chunker, before: str, after: str, at: int) -> tuple[int, int]:
    """Chunks of ``after`` that ``before`` does not hold, and the bound of shared.paragraphs:
    the chunks now holding paragraph ``at``, plus the other paragraphs of the old chunk holding it,
    plus the paragraphs of the old chunk that began after it (at least 1, none after the last)."""
    old_runs = chunker.runs(before)
    new_runs = chunker.runs(after)
    old_texts = {chunk.text for _, chunks in old_runs for chunk in chunks}
    fresh = sum(1 for _, chunks in new_runs for chunk in chunks if chunk.text not in old_texts)
    holding = next(chunks for (first, last), chunks in new_runs if first <= at <= last)
    old_first, old_last = next(run for run, _ in old_runs if run[0] <= at <= run[1])
    after_it = next((last - first + 1 for (first, last), _ in old_runs if first == at + 1), 1)
    last_paragraph = at == len(paragraph_spans(after)) - 1
    return fresh, len(holding) + (old_last - old_first) + (0 if last_paragraph else after_it)


@given(edit=edits())
@PROPERTY_SETTINGS
def test_an_edit_of_one_paragraph_re_chunks_at_most_its_chunk_and_the_next(
    edit: tuple[list[str], int, str], chunker: Chunker
) -> None:
    # Given a text of paragraphs, and the same text with one paragraph edited
    paragraphs, at, edited = edit
    before = "\n\n".join(paragraphs)
    after = "\n\n".join([*paragraphs[:at], edited, *paragraphs[at + 1 :]])

    # When both are chunked
    fresh, bound = _bound(chunker, before, after, at)

    # Then the chunks not in the old layout are within the bound
    assert fresh <= bound


@given(paragraphs=st.lists(BODIES, min_size=1, max_size=30), at=st.integers(0, 29), sentence=SENTENCES)
@PROPERTY_SETTINGS
def test_a_sentence_added_that_keeps_the_tree_re_chunks_one_chunk_or_the_halves_of_its_own(
    paragraphs: list[str], at: int, sentence: str, chunker: Chunker
) -> None:
    # Given paragraphs, and one of them (C the chunk holding it) with a sentence added that leaves
    # the order of the paragraphs' keys as it was (so every cut of the tree) and still fits a chunk
    at = at % len(paragraphs)
    texts = [f"Part {i}. {body}" for i, body in enumerate(paragraphs)]
    edited = f"{texts[at]} {sentence}"
    after_texts = [*texts[:at], edited, *texts[at + 1 :]]
    assume(_key_order(texts) == _key_order(after_texts))
    assume(chunker.count_tokens(edited) <= SIZE and len(edited) <= chunker.max_chars)

    # When both texts are chunked
    old_runs = chunker.runs("\n\n".join(texts))
    new_runs = chunker.runs("\n\n".join(after_texts))
    old_texts = {chunk.text for _, chunks in old_runs for chunk in chunks}
    fresh = [chunk.text for _, chunks in new_runs for chunk in chunks if chunk.text not in old_texts]
    old_run = next(run for run, _ in old_runs if run[0] <= at <= run[1])
    new_run = next(run for run, _ in new_runs if run[0] <= at <= run[1])

    # Then C with the sentence is the one chunk changed when it still fits; else C is cut, and
    # its parts are the chunks changed: at least two, at most one a paragraph of C
    if new_run == old_run:
        assert len(fresh) == 1
    else:
        assert new_run[0] >= old_run[0] and new_run[1] <= old_run[1]
        assert 2 <= len(fresh) <= old_run[1] - old_run[0] + 1


def _key_order(paragraphs: list[str]) -> list[int]:
    return sorted(range(len(paragraphs)), key=lambda i: anchor_key(paragraphs[i]))


TEXTS = st.lists(BODIES | LONG_BODIES | st.text(max_size=200), max_size=20).map("\n\n".join)


@given(text=TEXTS)
@PROPERTY_SETTINGS
def test_every_chunk_by_paragraphs_fits_both_bounds_in_the_texts_order(text: str, chunker: Chunker) -> None:
    # When any text of paragraphs is chunked by them
    chunks = chunker.chunk(text)

    # Then each chunk is within its bounds, none is empty, and they come in the text's order
    position = 0
    for chunk in chunks:
        assert chunk.text and chunk.text == chunk.text.strip()
        assert 0 < chunk.token_count == chunker.count_tokens(chunk.text) <= SIZE
        assert len(chunk.text) <= chunker.max_chars == SIZE * MAX_CHARS_PER_TOKEN
        position = text.find(chunk.text, position)
        assert position >= 0, chunk.text
