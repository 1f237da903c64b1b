"""The structure-aware chunkers: ``headings`` cuts at sections (Markdown, reStructuredText),
``semantic`` where consecutive sentences' embeddings diverge; both keep every chunk a slice of
its document, so gold spans still map to chunks."""

from pathlib import Path

import pyarrow as pa
import pytest

from ragsweep.documents.chunking import chunk_documents
from ragsweep.documents.extraction import extract_html
from ragsweep.documents.sources import read_documents
from ragsweep.documents.structured import find_headings, heading_path, headings, sections
from ragsweep.embeddings.cache import EmbeddingCache
from ragsweep.models.embedding import load_tokenizer
from ragsweep.sweep.space import SearchSpace
from ragsweep.sweep.steps import build_chunks

MODEL = "all-MiniLM-L6-v2"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "docs"
WORDS = str.split  # a token a word: sizes the tests can count

MARKDOWN = """# Guide

Intro to the guide.

## Install

Run the installer. Then restart.

## Configure
### Ports

Open port 443.

---

A break above.
"""

RST = """=====
Title
=====

Intro text.

Section A
---------

Body a.

Sub
~~~

Sub body.

Section B
---------

B body.

```
# a comment in code, not a heading
```
"""


def test_markdown_and_rst_headings_are_found_with_their_levels():
    assert [(level, title) for _, _, level, title in find_headings(MARKDOWN)] == [
        (1, "Guide"),
        (2, "Install"),
        (2, "Configure"),
        (3, "Ports"),
    ]  # the ``---`` under a blank line is a thematic break
    assert [(level, title) for _, _, level, title in find_headings(RST)] == [
        (1, "Title"),
        (2, "Section A"),
        (3, "Sub"),
        (2, "Section B"),
    ]  # the ``~~~`` under Sub is an underline, so the fenced block after B is still code


def test_sections_are_boundaries_and_a_bare_heading_joins_the_next_section():
    chunks = headings(50, 0, WORDS)(MARKDOWN)
    assert chunks == [
        "# Guide\n\nIntro to the guide.",
        "## Install\n\nRun the installer. Then restart.",
        "## Configure\n### Ports\n\nOpen port 443.\n\n---\n\nA break above.",
    ]
    assert [RST[s:e].split("\n")[1 if RST[s] == "=" else 0] for s, e in sections(RST)] == [
        "Title",
        "Section A",
        "Sub",
        "Section B",
    ]


def test_html_headings_are_sections_with_their_path():
    html = b"""<html><title>Admin</title><body><h1>Setup</h1><p>Install it.</p>
    <h2>Ports <em>and</em> TLS</h2><p>Open port 443.</p><h2>Users</h2><p>Add one.</p></body>"""
    text = extract_html(html)
    chunks = headings(50, 0, WORDS)(text)
    assert chunks == [
        "Admin",  # the page's title: the text before the first heading
        "# Setup\n\nInstall it.",
        "## Ports and TLS\n\nOpen port 443.",
        "## Users\n\nAdd one.",
    ]
    assert heading_path(text, text.index("Open port")) == ["Setup", "Ports and TLS"]


def test_a_long_section_is_split_by_tokens_within_the_section():
    body = " ".join(f"Sentence number {i} is here." for i in range(40))
    text = f"# One\n\n{body}\n\n# Two\n\nShort."
    chunks = headings(30, 5, WORDS)(text)
    assert len(chunks) > 3
    assert all(len(WORDS(c)) <= 30 for c in chunks)
    assert chunks[-1] == "# Two\n\nShort."  # never merged with the long section's tail
    assert not any("# Two" in c for c in chunks[:-1])


def test_heading_path_names_the_enclosing_sections():
    assert heading_path(MARKDOWN, MARKDOWN.index("Open port")) == ["Guide", "Configure", "Ports"]
    assert heading_path(MARKDOWN, MARKDOWN.index("Run the")) == ["Guide", "Install"]
    assert heading_path(RST, RST.index("B body")) == ["Title", "Section B"]
    assert heading_path("no headings", 3) == []


@pytest.fixture(scope="module")
def documents() -> pa.Table:
    return read_documents(str(EXAMPLES)).table


@pytest.fixture(scope="module")
def semantic_chunks(documents, tmp_path_factory) -> tuple[pa.Table, EmbeddingCache]:
    """Three example documents (Markdown, text, HTML) chunked semantically by the bundled
    model, through a cache."""
    cache = EmbeddingCache(tmp_path_factory.mktemp("embeddings"))
    [config] = SearchSpace(chunkers=("semantic",), chunk_sizes=(128,)).chunk_configs()
    return build_chunks(few(documents), config, cache), cache


def few(documents: pa.Table) -> pa.Table:
    keep = {"admin/configuration.md", "faq/troubleshooting.txt", "policies/pricing.html"}
    return documents.filter(pa.array([d in keep for d in documents["doc_id"].to_pylist()]))


@pytest.mark.parametrize("chunker", ["headings", "semantic"])
def test_every_chunk_is_its_documents_text_so_gold_spans_map(documents, chunker, request):
    texts = dict(zip(documents["doc_id"].to_pylist(), documents["text"].to_pylist(), strict=True))
    if chunker == "semantic":
        chunks = request.getfixturevalue("semantic_chunks")[0]
    else:
        chunks = chunk_documents(documents, chunker, 128, 16, load_tokenizer(MODEL))
    assert chunks.num_rows > len(set(chunks["doc_id"].to_pylist()))
    tokenize = load_tokenizer(MODEL)
    for row in chunks.to_pylist():
        assert texts[row["doc_id"]][row["start"] : row["end"]] == row["text"]
        assert len(tokenize(row["text"])) <= 128
    if chunker == "headings":  # no chunk of a Markdown document crosses a heading
        for row in chunks.to_pylist():
            if row["doc_id"].endswith(".md"):
                inner = [s for s, *_ in find_headings(texts[row["doc_id"]])]
                assert not any(row["start"] < s < row["end"] for s in inner), row["text"][:80]


def test_semantic_chunks_break_where_the_topic_changes():
    cooking = " ".join(
        [
            "Preheat the oven to two hundred degrees.",
            "Whisk the eggs with sugar until pale.",
            "Fold the flour gently into the batter.",
            "Bake the cake for forty minutes.",
        ]
    )
    networks = " ".join(
        [
            "The router forwards packets between subnets.",
            "A firewall drops traffic on closed ports.",
            "DNS resolves host names to IP addresses.",
            "TLS encrypts the connection to the server.",
        ]
    )
    table = pa.table({"doc_id": ["a.txt"], "text": [f"{cooking} {networks}"]})
    cache = EmbeddingCache()
    embed = lambda texts: cache.embed(MODEL, texts)  # noqa: E731
    chunks = chunk_documents(table, "semantic", 256, 0, load_tokenizer(MODEL), embed)
    assert chunks["text"].to_pylist() == [cooking, networks]


def test_semantic_chunking_embeds_each_sentence_window_once_through_the_cache(
    documents, semantic_chunks
):
    """A second chunking with the same store embeds no sentence again: same chunks."""
    first, cache = semantic_chunks
    again = EmbeddingCache(cache.files.uri)
    [config] = SearchSpace(chunkers=("semantic",), chunk_sizes=(128,)).chunk_configs()
    second = build_chunks(few(documents), config, again)
    assert again.encoded == 0
    assert second.drop(["embedding"]).equals(first.drop(["embedding"]))


def test_a_chunker_that_embeds_without_a_model_is_a_clear_error(documents):
    with pytest.raises(ValueError, match="chunker semantic embeds sentences"):
        chunk_documents(documents, "semantic", 128, 0, WORDS)
