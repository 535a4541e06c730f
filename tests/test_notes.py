"""Notes: the service on SQLite and on PostgreSQL (owner-only, hostile input, full-text
queries that must never break, chunks, replace-by-source, the vector cache), the builtin
WordLlama embeddings really loaded, the OpenAI-compatible embeddings adapter against a
local fake /v1/embeddings, `/v1/notes` through the real app, the tools through the
registry and a turn, and `sessiongate notes import`."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from sessiongate.agents.tools import ToolContext
from sessiongate.cli.main import app as cli_app
from sessiongate.config import Settings, cross_check, load_settings
from sessiongate.config.tools import NotesConfig
from sessiongate.core.clock import ManualClock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import KeyRef
from sessiongate.core.notes import (
    MAX_QUERY_CHARS,
    RRF_K,
    chunk_text,
    markdown_title,
    reciprocal_rank_fusion,
    search_words,
)
from sessiongate.errors import ConfigError, SessionGateError
from sessiongate.models.embeddings import (
    EmbeddingsFailed,
    OpenAIEmbedder,
    WordLlamaEmbedder,
    wordllama_folder,
)
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.notes import NoteService
from sessiongate.store.sqlite import notes as sqlite_notes
from sessiongate.store.sqlite.notes import SQLiteNoteStore, fts_match
from sessiongate.store.sqlite.store import SQLiteStore
from tests.conftest import BACKENDS, START
from tests.support.agent_models import Call, ToolModel
from tests.support.fake_providers import FakeServer, Reply, _read_request, _respond, closed_port
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect

ALICE_CONTEXT = ToolContext("alice", False, KeyRef("alice", "chat:alice"), "main", "turn-1")
BOB_CONTEXT = ToolContext("bob", False, KeyRef("bob", "chat:bob"), "main", "turn-2")
EMBEDDINGS_KEY_ENV = "SG_TEST_EMBEDDINGS_KEY"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one always does.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


def settings_for(tmp_path: Path, database_url: str = "", **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "database": {"url": database_url, "pool_size": 4},
        "lifecycle": {"timezone": "UTC"},
        "agents": {"defaults": {"model": "scripted"}},
    }
    values.update(extra)
    return Settings(**values)


@pytest.fixture
async def engines() -> AsyncIterator[list[Engine]]:
    """Engines a test builds (each started), closed afterwards."""
    built: list[Engine] = []
    yield built
    for engine in built:
        await engine.aclose()


async def started(engines: list[Engine], tmp_path: Path, database_url: str, **extra: Any) -> Engine:
    engine = build_engine(
        settings_for(tmp_path, database_url, **extra),
        clock=ManualClock(START),
        models={"scripted": ScriptedModel()},
    )
    engines.append(engine)
    await engine.start()
    return engine


def notes_of(engine: Engine) -> NoteService:
    assert engine.notes is not None
    return engine.notes


@pytest.fixture
async def notes(database_url: str, engines: list[Engine], tmp_path: Path) -> NoteService:
    """Keyword-only notes (no embeddings), on the backend under test."""
    return notes_of(await started(engines, tmp_path, database_url))


async def codes(call: Any) -> tuple[str, int]:
    with pytest.raises(SessionGateError) as raised:
        await call
    return raised.value.code, raised.value.status


# -- the pure part ------------------------------------------------------------------------


def test_chunks_follow_paragraphs_and_keep_every_word() -> None:
    paragraphs = [f"Paragraph {n}. " + "word " * 30 for n in range(10)]
    text = "\n\n".join(paragraphs)
    chunks = chunk_text(text, 400)
    assert len(chunks) > 1 and all(len(c) <= 400 for c in chunks)
    # No paragraph is cut: each chunk is whole paragraphs joined by a blank line.
    for chunk in chunks:
        for piece in chunk.split("\n\n"):
            assert piece.strip() in [p.strip() for p in paragraphs]
    assert " ".join(chunks).split() == " ".join(paragraphs).split()


def test_a_paragraph_longer_than_a_chunk_is_cut_at_sentences_then_hard() -> None:
    sentences = " ".join(f"Sentence number {n} ends here." for n in range(60))
    chunks = chunk_text(sentences, 200)
    assert all(len(c) <= 200 for c in chunks)
    assert all(c.endswith(".") for c in chunks)  # cut after a sentence, not mid-word
    blob = "x" * 1000  # one unbroken run: cut hard, nothing lost
    assert "".join(chunk_text(blob, 300)) == blob
    assert chunk_text("   \n\n \t ", 300) == []


def test_search_words_never_carry_syntax() -> None:
    assert search_words('NEAR("a" b*) OR title:x AND (c') == [
        "near",
        "a",
        "b",
        "or",
        "title",
        "x",
        "and",
        "c",
    ]
    assert search_words("Run run RUN runs") == ["run", "runs"]
    assert search_words("*** ((( )))") == []
    assert len(search_words(" ".join(f"w{n}" for n in range(100)))) == 32
    assert search_words("a" * 65 + " ok") == ["ok"]  # a 65-letter "word" is not one
    assert fts_match(['say "hi"', "x"]) == '"say ""hi""" OR "x"'


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    fused = dict(reciprocal_rank_fusion([[1, 2, 3], [3, 4]]))
    assert fused[3] == pytest.approx(1 / (RRF_K + 3) + 1 / (RRF_K + 1))
    assert fused[1] == pytest.approx(1 / (RRF_K + 1))
    assert next(i for i, _ in reciprocal_rank_fusion([[1, 2, 3], [3, 4]])) == 3
    # Ties go by id, so the order is the same however the lists were built.
    assert [i for i, _ in reciprocal_rank_fusion([[7], [5]])] == [5, 7]


def test_markdown_title_is_the_first_heading_outside_code() -> None:
    assert markdown_title("intro\n\n```\n# not this\n```\n## Running plan ##\n# Later") == (
        "Running plan"
    )
    assert markdown_title("no heading at all\n#hashtag") is None


# -- the service, on both stores ----------------------------------------------------------


async def test_added_notes_list_newest_first_in_pages(notes: NoteService) -> None:
    clock = notes.clock
    assert isinstance(clock, ManualClock)
    added = []
    for n in range(5):
        added.append(await notes.add("alice", f"note {n}", title=f"T{n}", source=f"s{n}.md"))
        clock.advance(timedelta(seconds=1))
    await notes.add("bob", "bob's own")
    first = added[0]
    assert (first.owner, first.title, first.source, first.created_at) == (
        "alice",
        "T0",
        "s0.md",
        START,
    )
    page = await notes.list_notes("alice", limit=2)
    assert [n.note_id for n in page] == [added[4].note_id, added[3].note_id]
    rest = await notes.list_notes("alice", limit=10, before=page[-1].note_id)
    assert [n.note_id for n in rest] == [a.note_id for a in reversed(added[:3])]
    assert rest[-1] == first  # every column survives the round trip through the store
    assert [n.content for n in await notes.list_notes("bob")] == ["bob's own"]


async def test_search_ranks_chunks_of_the_owners_notes_only(notes: NoteService) -> None:
    await notes.add(
        "alice", "My running plan: Monday 3 miles, Wednesday 5 miles.", source="fitness.md"
    )
    await notes.add("alice", "Groceries: milk, eggs, bread.", title="Shopping")
    await notes.add("bob", "Bob's running plan is secret.", source="bob.md")
    result = await notes.search("alice", "running plan")
    assert result.semantic is False
    assert [h.source for h in result.hits] == ["fitness.md"]
    hit = result.hits[0]
    assert hit.content.startswith("My running plan") and hit.score == pytest.approx(
        1 / (RRF_K + 1), abs=1e-6
    )
    # Stemmed on both stores: "runs" and "running" are one word.
    assert [h.source for h in (await notes.search("alice", "runs")).hits] == ["fitness.md"]
    # The title is searched too.
    assert [h.title for h in (await notes.search("alice", "shopping")).hits] == ["Shopping"]
    assert (await notes.search("bob", "groceries")).hits == []
    assert (await notes.search("carol", "running")).hits == []


async def test_a_search_returns_the_matching_chunk_not_the_whole_note(
    database_url: str, engines: list[Engine], tmp_path: Path
) -> None:
    notes = notes_of(await started(engines, tmp_path, database_url, notes={"chunk_chars": 200}))
    filler = [f"Paragraph {n} talks about nothing in particular, at some length." for n in range(8)]
    filler[5] = "The spare key is under the blue flowerpot by the door."
    await notes.add("alice", "\n\n".join(filler), title="House")
    (hit,) = (await notes.search("alice", "flowerpot")).hits
    assert "flowerpot" in hit.content and len(hit.content) <= 200
    assert hit.seq > 0 and "Paragraph 0 " not in hit.content
    assert len((await notes.search("alice", "particular", limit=50)).hits) >= 3


async def test_another_users_note_is_not_found_like_an_unknown_id(notes: NoteService) -> None:
    note = await notes.add("alice", "alice's secret")
    with pytest.raises(SessionGateError) as other:
        await notes.delete("bob", note.note_id)
    unknown = note.note_id[:-4] + ("0000" if note.note_id[-4:] != "0000" else "1111")
    with pytest.raises(SessionGateError) as missing:
        await notes.delete("bob", unknown)
    assert other.value.code == missing.value.code == "note_not_found"
    assert other.value.status == missing.value.status == 404
    assert other.value.message.replace(note.note_id, "ID") == missing.value.message.replace(
        unknown, "ID"
    )
    # Still there for its owner, and gone once the owner deletes it.
    assert [h.note_id for h in (await notes.search("alice", "secret")).hits] == [note.note_id]
    await notes.delete("alice", note.note_id)
    assert (await notes.search("alice", "secret")).hits == []
    assert await notes.list_notes("alice") == []
    assert (await codes(notes.delete("alice", note.note_id)))[0] == "note_not_found"


async def test_import_replaces_the_note_of_the_same_source(notes: NoteService) -> None:
    first, replaced = await notes.import_note("alice", "old words", title="A", source="a.md")
    assert replaced == 0
    second, replaced = await notes.import_note("alice", "new words", title="A", source="a.md")
    assert replaced == 1 and second.note_id != first.note_id
    await notes.import_note("bob", "bob keeps his", title="A", source="a.md")
    assert [n.content for n in await notes.list_notes("alice")] == ["new words"]
    assert (await notes.search("alice", "old")).hits == []
    assert [h.content for h in (await notes.search("alice", "words")).hits] == ["new words"]
    assert [n.content for n in await notes.list_notes("bob")] == ["bob keeps his"]
    # A plain add with a source never replaces.
    await notes.add("alice", "newer words", source="a.md")
    assert len(await notes.list_notes("alice")) == 2


BAD_ADDS = [
    ({"content": ""}, "invalid_content", 400),
    ({"content": " \n\t "}, "invalid_content", 400),
    ({"content": 42}, "invalid_content", 400),
    ({"content": "nul \x00 inside"}, "invalid_content", 400),
    ({"content": "escape \x1b[31m red"}, "invalid_content", 400),
    ({"content": "lone \ud800 surrogate"}, "invalid_content", 400),
    ({"content": "x" * 1001}, "note_too_large", 413),
    ({"content": "ok", "title": "two\nlines"}, "invalid_title", 400),
    ({"content": "ok", "title": "t" * 201}, "invalid_title", 400),
    ({"content": "ok", "title": 7}, "invalid_title", 400),
    ({"content": "ok", "source": "s" * 1001}, "invalid_source", 400),
    ({"content": "ok", "source": "a\x00b"}, "invalid_source", 400),
]


@pytest.mark.parametrize(("fields", "code", "status"), BAD_ADDS)
async def test_hostile_notes_are_refused_and_keep_nothing(
    database_url: str,
    engines: list[Engine],
    tmp_path: Path,
    fields: dict[str, Any],
    code: str,
    status: int,
) -> None:
    notes = notes_of(await started(engines, tmp_path, database_url, notes={"max_note_chars": 1000}))
    rest = dict(fields)  # the parameter is shared by both backends' runs
    content = rest.pop("content")
    assert await codes(notes.add("alice", content, **rest)) == (code, status)
    assert await notes.list_notes("alice") == []


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda n: n.search("alice", "x", 0), "invalid_limit"),
        (lambda n: n.search("alice", "x", 51), "invalid_limit"),
        (lambda n: n.search("alice", "x", True), "invalid_limit"),
        (lambda n: n.search("alice", "x", "5"), "invalid_limit"),
        (lambda n: n.list_notes("alice", limit=101), "invalid_limit"),
        (lambda n: n.search("alice", ""), "invalid_query"),
        (lambda n: n.search("alice", "   "), "invalid_query"),
        (lambda n: n.search("alice", "x" * (MAX_QUERY_CHARS + 1)), "invalid_query"),
        (lambda n: n.search("alice", "a\x00b"), "invalid_query"),
        (lambda n: n.search("alice", "\udfff"), "invalid_query"),
        (lambda n: n.delete("alice", "nope"), "invalid_note_id"),
        (lambda n: n.delete("alice", "../../etc/passwd"), "invalid_note_id"),
        (lambda n: n.delete("alice", "0190C2A4-1B2C-7D3E-8F40-123456789ABC"), "invalid_note_id"),
        (lambda n: n.list_notes("alice", before="x" * 300), "invalid_note_id"),
    ],
)
async def test_bad_limits_queries_and_ids_are_4xx(notes: NoteService, call: Any, code: str) -> None:
    found, status = await codes(call(notes))
    assert found == code and status == 400


HOSTILE_QUERIES = [
    '"',
    '"unbalanced running',
    'running"',
    "NEAR(running plan, 2)",
    "running NEAR plan",
    "run*",
    "*",
    "(running",
    "running)",
    "((((",
    "title:running",
    "content : plan",
    "^running",
    "-running +plan",
    "running AND OR NOT plan",
    "'; DROP TABLE notes; --",
    "a & b | !c <-> d:*",
    "\\\"\\'",
    "running" + " ~!@#$%^&*()_+{}|:<>?[];',./`" * 300,
    ('"(*' + "running NEAR " * 1000)[:MAX_QUERY_CHARS],
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
async def test_no_query_text_breaks_the_full_text_index(notes: NoteService, query: str) -> None:
    mine = await notes.add("alice", "My running plan for the spring.", source="fitness.md")
    await notes.add("bob", "Bob also has a running plan.")
    result = await notes.search("alice", query)
    # Found exactly when the query holds one of the note's words, and only alice's note.
    expected = [mine.note_id] if {"running", "run", "plan"} & set(search_words(query)) else []
    assert [h.note_id for h in result.hits] == expected


async def test_a_query_of_exactly_the_longest_length_answers(notes: NoteService) -> None:
    await notes.add("alice", "plan")
    query = ("plan " * MAX_QUERY_CHARS)[:MAX_QUERY_CHARS]
    assert len((await notes.search("alice", query)).hits) == 1


async def test_sqlite_leaves_out_words_in_more_than_half_the_chunks(
    engines: list[Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bm25 gives such a word no weight, so scoring every chunk that holds it was wasted
    work; the answer for the other words stays the same, and the counts follow writes."""
    monkeypatch.setattr(sqlite_notes, "PRUNE_FROM_CHUNKS", 2)
    notes = notes_of(await started(engines, tmp_path, ""))
    for n in range(3):
        await notes.add("alice", f"common word number {n}")
    rare = await notes.add("alice", "the rare word")
    # "word" is in all 4 chunks, "common" in 3 of 4: both left out, "rare" decides.
    assert [h.note_id for h in (await notes.search("alice", "common rare")).hits] == [rare.note_id]
    # A query of only common words keeps them all.
    assert len((await notes.search("alice", "common word")).hits) == 4
    # After more writes "rare" is the common one: the cached counts must not answer.
    for _ in range(5):
        await notes.add("alice", "rare again")
    found = (await notes.search("alice", "common rare", limit=50)).hits
    assert sorted(h.content for h in found) == [f"common word number {n}" for n in range(3)]
    # Another owner's chunks count towards the totals but are never returned.
    await notes.add("bob", "common rare")
    found = (await notes.search("alice", "common rare", limit=50)).hits
    assert all(h.content != "common rare" for h in found)


async def test_an_in_memory_sqlite_store_searches_inline() -> None:
    store = SQLiteStore.open(":memory:")
    clock = ManualClock(START)
    notes = NoteService(SQLiteNoteStore(store), None, IdGenerator(clock), clock, NotesConfig())
    await notes.add("alice", "inline search of a memory database")
    assert [h.content for h in (await notes.search("alice", "memory")).hits] == [
        "inline search of a memory database"
    ]
    assert isinstance(notes.store, SQLiteNoteStore) and notes.store._worker is None
    await notes.aclose()
    await store.close()


async def test_a_file_store_searches_on_its_worker_and_closes_it(
    engines: list[Engine], tmp_path: Path
) -> None:
    engine = await started(engines, tmp_path, "")
    notes = notes_of(engine)
    await notes.add("alice", "threaded reader")
    assert [h.content for h in (await notes.search("alice", "reader")).hits] == ["threaded reader"]
    rows = notes.store
    assert isinstance(rows, SQLiteNoteStore) and rows._worker is not None
    await notes.aclose()
    assert rows._worker is None and rows._reader is None
    # A later search opens them again.
    assert len((await notes.search("alice", "threaded")).hits) == 1


# -- embeddings ---------------------------------------------------------------------------

JOGGING = "This morning I went jogging along the river for forty minutes."
UNRELATED = [
    "Buy milk, eggs and bread at the grocery store.",
    "Meeting with the accountant about the tax return on Friday.",
    "The car needs new tyres before the winter.",
    "Recipe: tomato soup with basil and garlic.",
]


async def test_builtin_embeddings_find_a_note_with_no_shared_keyword(
    database_url: str, engines: list[Engine], tmp_path: Path
) -> None:
    semantic = notes_of(
        await started(engines, tmp_path / "a", database_url, notes={"embeddings": "builtin"})
    )
    for text in [*UNRELATED, JOGGING]:
        await semantic.add("alice", text)
    assert search_words("running").count("running") == 1 and "running" not in JOGGING
    result = await semantic.search("alice", "running")
    assert result.semantic is True
    assert result.hits[0].content == JOGGING
    # Keyword ranking alone finds nothing: the semantic half did it.
    assert (await semantic.store.keyword_chunks("alice", ["running"], 10)) == []
    # And a keyword match still fuses with its semantic rank to come first.
    top = (await semantic.search("alice", "tomato soup recipe")).hits[0]
    assert top.content.startswith("Recipe") and top.score > 1 / (RRF_K + 1)
    # Another user's vectors never answer.
    assert (await semantic.search("bob", "running")).hits == []


async def test_the_vector_cache_follows_writes_from_another_process(
    database_url: str, engines: list[Engine], tmp_path: Path
) -> None:
    one = notes_of(await started(engines, tmp_path, database_url, notes={"embeddings": "builtin"}))
    await one.add("alice", UNRELATED[0])
    assert [h.content for h in (await one.search("alice", "jogging exercise")).hits] != [JOGGING]
    # Another process (PostgreSQL: another engine on the database; SQLite: another service
    # over the same file) adds and deletes notes; the first one's cache must notice.
    if database_url:
        other = notes_of(
            await started(engines, tmp_path, database_url, notes={"embeddings": "builtin"})
        )
    else:
        other = NoteService(one.store, one.embedder, one.ids, one.clock, one.config)
    added = await other.add("alice", JOGGING)
    assert (await one.search("alice", "running")).hits[0].content == JOGGING
    await other.delete("alice", added.note_id)
    assert all(h.content != JOGGING for h in (await one.search("alice", "running")).hits)


async def test_builtin_vectors_are_unit_float32_and_stored_with_their_model(
    database_url: str, engines: list[Engine], tmp_path: Path
) -> None:
    notes = notes_of(
        await started(engines, tmp_path, database_url, notes={"embeddings": "builtin"})
    )
    await notes.add("alice", "one " * 150 + "\n\n" + "two " * 150, title="Numbers")
    assert notes.embedder is not None
    vectors = await notes.store.chunk_vectors("alice", notes.embedder.name, 256)
    assert vectors.matrix.dtype == np.float32 and vectors.matrix.shape == (2, 256)
    assert np.allclose(np.linalg.norm(vectors.matrix, axis=1), 1.0, atol=1e-5)
    # Vectors of another embedder (or size) are never compared with these.
    assert len((await notes.store.chunk_vectors("alice", "openai:other", 256)).ids) == 0
    assert len((await notes.store.chunk_vectors("alice", notes.embedder.name, 128)).ids) == 0


async def test_wordllama_loads_from_its_wheel_and_downloads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import requests

    def no_network(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a download was attempted: {args}")

    monkeypatch.setattr(requests, "get", no_network)
    monkeypatch.setattr(requests.Session, "request", no_network)
    monkeypatch.setenv("HOME", str(tmp_path))  # where the default cache would be
    folder = wordllama_folder()
    assert (folder / "weights" / "l2_supercat_256.safetensors").is_file()
    assert (folder / "tokenizers" / "l2_supercat_tokenizer_config.json").is_file()
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    embedder = WordLlamaEmbedder()
    vectors = await embedder.embed(["running", "jogging", "tax return"])
    assert vectors.shape == (3, 256)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
    assert not (tmp_path / ".cache").exists()
    after = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    assert {p for p in after if "__pycache__" not in str(p)} == {
        p for p in before if "__pycache__" not in str(p)
    }


# -- the OpenAI-compatible embeddings adapter ---------------------------------------------


def bag_of_words(text: str, dimensions: int = 64) -> list[float]:
    """A deterministic stand-in embedding: word hashes into buckets (shared words meet)."""
    vector = [0.0] * dimensions
    for word in search_words(text):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dimensions] += 1.0
    return vector


class EmbeddingsServer(FakeServer):
    """`POST /v1/embeddings` answered from the request: one bag-of-words vector per input,
    listed in reverse order (the adapter must sort by `index`). `replies` still script
    failures: a non-empty list answers those first."""

    def __init__(self, *failures: Reply) -> None:
        super().__init__(*failures)
        self.failures = list(failures)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            seen = await _read_request(reader)
            if seen is None:
                return
            self.requests.append(seen)
            if len(self.requests) <= len(self.failures):
                reply = self.failures[len(self.requests) - 1]
            else:
                inputs = seen.body["input"]
                data = [
                    {"object": "embedding", "index": i, "embedding": bag_of_words(t)}
                    for i, t in enumerate(inputs)
                ]
                reply = Reply(
                    json_body={
                        "object": "list",
                        "data": list(reversed(data)),
                        "model": seen.body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1},
                    }
                )
            await _respond(writer, reply, asyncio.Event())
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def openai_embeddings(url: str, **model: Any) -> dict[str, Any]:
    return {
        "models": {
            "emb": {
                "provider": "openai",
                "base_url": f"{url}/v1",
                "model": "nomic-embed-text",
                "api_key_env": EMBEDDINGS_KEY_ENV,
                "max_retries": 0,
                "read_timeout": "5s",
                **model,
            }
        },
        "notes": {"embeddings": "emb"},
    }


async def test_openai_embeddings_through_a_local_server(
    database_url: str, engines: list[Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EMBEDDINGS_KEY_ENV, "sk-test-embeddings")
    async with EmbeddingsServer() as server:
        notes = notes_of(
            await started(engines, tmp_path, database_url, **openai_embeddings(server.url))
        )
        await notes.add("alice", "alpha beta " * 50 + "\n\n" + "gamma " * 100, title="Greek")
        await notes.add("alice", "delta epsilon")
        first = server.requests[0]
        assert (first.method, first.path) == ("POST", "/v1/embeddings")
        assert first.headers["authorization"] == "Bearer sk-test-embeddings"
        assert first.body["model"] == "nomic-embed-text"
        # Each chunk is embedded under its note's title.
        assert [t.split("\n")[0] for t in first.body["input"]] == ["Greek", "Greek"]
        result = await notes.search("alice", "epsilon zeta")
        assert result.semantic is True
        assert result.hits[0].content == "delta epsilon"
        assert server.requests[-1].body["input"] == ["epsilon zeta"]
        assert notes.embedder is not None and notes.embedder.dimensions == 64
        stored = await notes.store.chunk_vectors("alice", "openai:nomic-embed-text", 64)
        assert len(stored.ids) == 3
        # The stored vector is the server's, normalised (order restored from `index`).
        expected = np.array(bag_of_words("delta epsilon"), dtype=np.float32)
        assert np.allclose(stored.matrix[-1], expected / np.linalg.norm(expected), atol=1e-6)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(status=500, json_body={"error": {"message": "boom"}}), "HTTP 500"),
        (Reply(json_body={"object": "list", "data": []}), "wrong number"),
        (Reply(json_body={"object": "list", "data": [{"index": 0, "embedding": ["x"]}]}), "shape"),
        (Reply(json_body={"object": "list", "data": [{"index": 5, "embedding": [1.0]}]}), "shape"),
        (Reply(json_body={"object": "list", "data": [{"index": 0, "embedding": [1e999]}]}), ""),
    ],
)
async def test_a_failing_embeddings_server_fails_the_add_and_keeps_nothing(
    engines: list[Engine],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reply: Reply,
    message: str,
) -> None:
    monkeypatch.setenv(EMBEDDINGS_KEY_ENV, "k")
    async with EmbeddingsServer(reply) as server:
        notes = notes_of(await started(engines, tmp_path, "", **openai_embeddings(server.url)))
        with pytest.raises(EmbeddingsFailed) as raised:
            await notes.add("alice", "something")
        assert raised.value.code == "embeddings_failed" and raised.value.status == 502
        assert message in raised.value.message
        assert await notes.list_notes("alice") == []


async def test_search_falls_back_to_keywords_when_the_embeddings_server_is_gone(
    engines: list[Engine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EMBEDDINGS_KEY_ENV, "k")
    async with EmbeddingsServer() as server:
        notes = notes_of(await started(engines, tmp_path, "", **openai_embeddings(server.url)))
        await notes.add("alice", "the spare key is under the flowerpot")
    assert isinstance(notes.embedder, OpenAIEmbedder)
    notes.embedder.base_url = f"http://127.0.0.1:{closed_port()}/v1"
    await notes.embedder.aclose()  # the next request builds a client for the new URL
    result = await notes.search("alice", "flowerpot")
    assert result.semantic is False
    assert [h.content for h in result.hits] == ["the spare key is under the flowerpot"]


# -- configuration ------------------------------------------------------------------------


def test_embeddings_must_name_builtin_or_an_openai_model(tmp_path: Path) -> None:
    assert cross_check(Settings(notes={"embeddings": "builtin"})) == []
    problems = cross_check(Settings(notes={"embeddings": "nope"}))
    assert problems == [
        "notes.embeddings: model 'nope' is not defined in [models] (or use \"builtin\")"
    ]
    claude = {"provider": "anthropic", "model": "claude"}
    (problem,) = cross_check(Settings(models={"c": claude}, notes={"embeddings": "c"}))
    assert "provider 'anthropic'" in problem
    file = tmp_path / "sg.toml"
    file.write_text('[notes]\nembeddings = "missing"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"notes\.embeddings"):
        load_settings(file)
    ok = {"provider": "openai", "model": "nomic-embed-text", "base_url": "http://127.0.0.1:1/v1"}
    assert cross_check(Settings(models={"e": ok}, notes={"embeddings": "e"})) == []


# -- /v1/notes through the real app -------------------------------------------------------


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("notes")
    settings = gateway_settings(
        path,
        notes={"max_note_chars": 5000},
        agents={"defaults": {"model": "toolmodel", "tools": ["notes_*"]}},
    )
    with running_gateway(settings, {"toolmodel": ToolModel("ok")}) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        yield c


def test_notes_over_http_add_list_search_delete(gw: Gateway, client: httpx.Client) -> None:
    created = client.post(
        "/v1/notes",
        json={
            "content": "Tent, stove and the blue sleeping bag.",
            "title": "Camping",
            "source": "trip.md",
        },
        headers=gw.auth("alice"),
    )
    assert created.status_code == 201
    note = created.json()
    assert set(note) == {"id", "title", "source", "created_at"}
    assert (note["title"], note["source"]) == ("Camping", "trip.md")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z", note["created_at"])

    listed = client.get("/v1/notes", headers=gw.auth("alice")).json()
    assert [n["id"] for n in listed["notes"]] == [note["id"]]
    assert listed["notes"][0]["content"] == "Tent, stove and the blue sleeping bag."
    assert listed["next_before"] is None

    found = client.get(
        "/v1/notes", params={"query": "sleeping bag", "limit": 3}, headers=gw.auth("alice")
    )
    assert found.status_code == 200
    (hit,) = found.json()["notes"]
    assert set(hit) == {"id", "title", "source", "content", "score"}
    assert (hit["id"], hit["source"], hit["title"]) == (note["id"], "trip.md", "Camping")
    assert hit["score"] > 0

    # Bob sees none of it, and deleting it answers as for an id that never existed.
    assert (
        client.get("/v1/notes", params={"query": "sleeping"}, headers=gw.auth("bob")).json()[
            "notes"
        ]
        == []
    )
    assert client.get("/v1/notes", headers=gw.auth("bob")).json()["notes"] == []
    other = client.delete(f"/v1/notes/{note['id']}", headers=gw.auth("bob"))
    unknown_id = note["id"][:-4] + ("0000" if note["id"][-4:] != "0000" else "1111")
    unknown = client.delete(f"/v1/notes/{unknown_id}", headers=gw.auth("bob"))
    assert other.status_code == unknown.status_code == 404
    assert other.json()["error"]["code"] == unknown.json()["error"]["code"] == "note_not_found"

    gone = client.delete(f"/v1/notes/{note['id']}", headers=gw.auth("alice"))
    assert gone.status_code == 204 and gone.content == b""
    assert client.get("/v1/notes", headers=gw.auth("alice")).json()["notes"] == []


def test_listing_pages_with_next_before(gw: Gateway, client: httpx.Client) -> None:
    ids = [
        client.post(
            "/v1/notes", json={"content": f"page note {n}"}, headers=gw.auth("root")
        ).json()["id"]
        for n in range(5)
    ]
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = client.get("/v1/notes", params=params, headers=gw.auth("root")).json()
        seen += [n["id"] for n in page["notes"]]
        if page["next_before"] is None:
            break
        params["before"] = page["next_before"]
    assert seen == list(reversed(ids))


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/notes", {}, 400, "invalid_request"),
        ("POST", "/v1/notes", {"content": 5}, 400, "invalid_request"),
        ("POST", "/v1/notes", {"content": "x", "owner": "bob"}, 400, "invalid_request"),
        ("POST", "/v1/notes", {"content": "  "}, 400, "invalid_content"),
        ("POST", "/v1/notes", {"content": "a\u0000b"}, 400, "invalid_content"),
        ("POST", "/v1/notes", {"content": "x" * 5001}, 413, "note_too_large"),
        ("POST", "/v1/notes", {"content": "x", "title": "a\nb"}, 400, "invalid_title"),
        ("GET", "/v1/notes?limit=0", None, 400, "invalid_limit"),
        ("GET", "/v1/notes?query=x&limit=51", None, 400, "invalid_limit"),
        ("GET", "/v1/notes?limit=many", None, 400, "invalid_request"),
        ("GET", "/v1/notes?query=", None, 400, "invalid_query"),
        ("GET", "/v1/notes?before=nope", None, 400, "invalid_note_id"),
        ("DELETE", "/v1/notes/not-an-id", None, 400, "invalid_note_id"),
    ],
)
def test_hostile_requests_get_a_4xx_with_a_code(
    gw: Gateway,
    client: httpx.Client,
    method: str,
    path: str,
    body: Any,
    status: int,
    code: str,
) -> None:
    response = client.request(method, path, json=body, headers=gw.auth("bob"))
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


def test_raw_bodies_and_missing_keys_are_refused(gw: Gateway, client: httpx.Client) -> None:
    lone = client.post(
        "/v1/notes",
        content=b'{"content": "lone \\ud800 surrogate"}',
        headers={**gw.auth("bob"), "Content-Type": "application/json"},
    )
    assert lone.status_code == 400 and lone.json()["error"]["code"] == "invalid_content"
    assert client.get("/v1/notes").status_code == 401
    assert client.post("/v1/notes", json={"content": "x"}).json()["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("query", HOSTILE_QUERIES[:-2])
def test_hostile_queries_over_http_answer_200(
    gw: Gateway, client: httpx.Client, query: str
) -> None:
    response = client.get("/v1/notes", params={"query": query}, headers=gw.auth("prime"))
    assert response.status_code == 200, response.text
    assert response.json()["notes"] == []


def test_the_notes_tools_are_listed_as_builtin(gw: Gateway, client: httpx.Client) -> None:
    tools = client.get("/v1/tools", headers=gw.auth("alice")).json()["tools"]
    by_name = {t["name"]: t for t in tools}
    assert {"notes_search", "notes_add"} <= set(by_name)
    assert by_name["notes_search"]["source"] == by_name["notes_add"]["source"] == "builtin"
    search = by_name["notes_search"]["parameters"]
    assert search["required"] == ["query"] and search["additionalProperties"] is False
    (bounded,) = [a for a in search["properties"]["limit"]["anyOf"] if a["type"] == "integer"]
    assert (bounded["minimum"], bounded["maximum"]) == (1, 50)


# -- the tools ----------------------------------------------------------------------------


async def test_tools_through_the_registry_act_for_the_caller_only(
    database_url: str, engines: list[Engine], tmp_path: Path
) -> None:
    engine = await started(engines, tmp_path, database_url)
    offered = await engine.tools.offered(["notes_*"], None, primary=False)
    assert list(offered) == ["notes_add", "notes_search"]
    assert "builtin-notes" in [source.name for source in engine.tools.sources]
    assert {tool.source for tool in offered.values()} == {"builtin"}
    call = engine.tools.call

    added = await call(
        offered,
        "c1",
        "notes_add",
        json.dumps({"content": "Passport renewal is due in May.", "title": "Admin"}),
        ALICE_CONTEXT,
        limit_seconds=10,
    )
    assert added.status == "ok" and "Admin" in added.content
    note_id = added.data["id"]
    assert [n.note_id for n in await notes_of(engine).list_notes("alice")] == [note_id]

    found = await call(
        offered, "c2", "notes_search", '{"query": "passport"}', ALICE_CONTEXT, limit_seconds=10
    )
    assert found.status == "ok"
    assert "Passport renewal is due in May." in found.content and "Admin" in found.content
    assert [r["id"] for r in found.data["results"]] == [note_id]
    assert found.data["semantic"] is False

    theirs = await call(
        offered, "c3", "notes_search", '{"query": "passport"}', BOB_CONTEXT, limit_seconds=10
    )
    assert theirs.status == "ok" and theirs.data["results"] == []
    assert "No notes match" in theirs.content

    for bad in ('{"query": "x", "limit": 0}', '{"query": ""}', '{"query": "x", "user": "bob"}'):
        refused = await call(offered, "c4", "notes_search", bad, ALICE_CONTEXT, limit_seconds=10)
        assert refused.status == "error"
    empty = await call(
        offered, "c5", "notes_add", '{"content": " "}', ALICE_CONTEXT, limit_seconds=10
    )
    assert empty.status == "error" and "content must not be empty" in empty.content


async def test_a_turn_searches_notes_and_the_model_reads_the_chunks(
    engines: list[Engine], tmp_path: Path
) -> None:
    model = ToolModel([Call("notes_search", {"query": "flowerpot"}, "s1")], "It is under the pot.")
    engine = build_engine(
        settings_for(tmp_path, agents={"main": {"model": model.name, "tools": ["notes_*"]}}),
        clock=ManualClock(START),
        models={model.name: model},
    )
    engines.append(engine)
    await engine.start()
    await notes_of(engine).add("alice", "The spare key is under the flowerpot.", source="house.md")
    events = await collect(engine, "where is the key?")
    (end,) = [e for e in events if e.type == "tool_end"]
    assert end.status == "ok" and "house.md" in end.output
    tool_message = model.requests[1].messages[-1]
    assert tool_message["role"] == "tool" and "spare key" in str(tool_message["content"])


# -- sessiongate notes import -------------------------------------------------------------


def cli(*args: str) -> Any:
    return CliRunner().invoke(cli_app, list(args), env={"COLUMNS": "250"})


def test_import_a_folder_of_markdown_idempotently(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    assert cli("users", "add", "alice", "--config", str(config)).exit_code == 0
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "fitness.md").write_text("# Running plan\n\nMon 3mi, Wed 5mi.\n", encoding="utf-8")
    (folder / "sub" / "recipes.md").write_text("Tomato soup with basil.\n", encoding="utf-8")
    (folder / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (folder / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "empty.md").write_text("\n\n", encoding="utf-8")
    (folder / "ignored.txt").write_text("# Not markdown", encoding="utf-8")

    first = cli("notes", "import", str(folder), "--user", "alice", "--config", str(config))
    assert first.exit_code == 0, first.output
    assert "skipped binary.md: is binary, not text" in first.output
    assert "skipped latin1.md: is not UTF-8 text" in first.output
    assert "skipped empty.md: is empty" in first.output
    assert "imported 2 notes for alice (0 replaced" in first.output
    assert "ignored.txt" not in first.output

    (folder / "fitness.md").write_text("# Running plan\n\nMon 4mi now.\n", encoding="utf-8")
    again = cli("notes", "import", str(folder), "--user", "alice", "--config", str(config))
    assert again.exit_code == 0 and "imported 2 notes for alice (2 replaced" in again.output

    async def stored() -> list[tuple[str | None, str | None, str]]:
        engine = build_engine(load_settings(config))
        try:
            await engine.start()
            notes = await notes_of(engine).list_notes("alice")
            return sorted((n.source, n.title, n.content) for n in notes)
        finally:
            await engine.aclose()

    assert asyncio.run(stored()) == [
        ("fitness.md", "Running plan", "# Running plan\n\nMon 4mi now.\n"),
        ("sub/recipes.md", "recipes", "Tomato soup with basil.\n"),
    ]


def test_import_refuses_an_unknown_user_and_a_missing_folder(tmp_path: Path) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    (tmp_path / "notes").mkdir()
    nobody = cli(
        "notes", "import", str(tmp_path / "notes"), "--user", "nobody", "--config", str(config)
    )
    assert nobody.exit_code == 1 and "no user named 'nobody'" in nobody.output
    missing = cli(
        "notes", "import", str(tmp_path / "nope"), "--user", "alice", "--config", str(config)
    )
    assert missing.exit_code == 1 and "is not a folder" in missing.output


def test_an_unreadable_file_is_skipped_and_the_rest_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "sg.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    assert cli("users", "add", "alice", "--config", str(config)).exit_code == 0
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "secret.md").write_text("x", encoding="utf-8")
    (folder / "zebra.md").write_text("stripes", encoding="utf-8")
    read_bytes = Path.read_bytes

    def refuse_secret(path: Path) -> bytes:
        # chmod 0 would not stop a test run as root: refuse the read itself.
        if path.name == "secret.md":
            raise PermissionError(13, "Permission denied")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refuse_secret)
    result = cli("notes", "import", str(folder), "--user", "alice", "--config", str(config))
    assert result.exit_code == 0, result.output
    assert "skipped secret.md: cannot be read (Permission denied)" in result.output
    assert "imported 1 notes for alice (0 replaced" in result.output
