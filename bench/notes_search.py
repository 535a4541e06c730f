"""Notes search latency: sessiongate's NoteService on SQLite vs ChromaDB (seed 002's store).

One run builds one user's notes (10,000 by default; deterministic generated text), embeds
every chunk ONCE with the builtin WordLlama model, and gives both stores the SAME vectors:

* sessiongate: `NoteService.add` for each note (the chunks and their vectors, through the
  SQLite store's FTS5 index and float32 BLOBs), then `NoteService.search` per query in
  three rankings: keyword only (FTS5 bm25), semantic only (numpy cosine over the user's
  cached vector matrix) and fused (both, reciprocal rank fusion), each answering the top 5
  chunks with their note id, title, source and text;
* ChromaDB: a persistent collection (HNSW, cosine) holding the same chunks, vectors,
  documents and metadata; `collection.query(query_embeddings=[v], n_results=5)` with the
  documents and metadata included (what seed 002's notes search asks of it). No owner
  filter: seed 002 has one user per collection, and a `where` filter would only slow it.

The queries are embedded once up front too, so both sides time ranking, not the model:
the service's embedder answers from that table. Queries are one or two mid-frequency
words, half of them with a very common word as well (natural questions carry some).
Every query runs on all four paths in a rotating order, after a warm-up, so drift on a
shared machine hits them alike. Latency is wall time around one call
(time.perf_counter_ns); p50 and p99 are nearest-rank.

    .venv/bin/python bench/notes_search.py            # 10,000 notes, 400 queries (~30 s)
    .venv/bin/python bench/notes_search.py --quick    # 2,000 notes, 150 queries (~10 s)
    .venv/bin/python bench/notes_search.py --json results.json

The last line printed is always `notes_search_fused_p50_ms=<x> chroma_p50_ms=<y>`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from sessiongate.config.tools import NotesConfig
from sessiongate.core.clock import ManualClock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.notes import Vectors, chunk_text
from sessiongate.models.embeddings import WordLlamaEmbedder, wordllama_folder
from sessiongate.service.notes import NoteService
from sessiongate.store.sqlite.notes import SQLiteNoteStore
from sessiongate.store.sqlite.store import SQLiteStore
from support.common import (
    ensure_bench_extras,
    load_average,
    machine_line,
    nearest_rank,
    render_table,
    version_of,
)

OWNER = "alice"
TOP_K = 5
TARGET_FUSED_P50_MS = 20.0
PATHS = ("keyword", "semantic", "fused", "chroma")


# -- deterministic notes ------------------------------------------------------------------


def vocabulary(size: int = 4000) -> list[str]:
    """Lower-case ASCII words of the WordLlama tokenizer's vocabulary, in token-id order
    (roughly frequency order: BPE merges the commonest pieces first). Read from the
    installed wheel, so every run on every machine draws the same words."""
    path = wordllama_folder() / "tokenizers" / "l2_supercat_tokenizer_config.json"
    vocab = json.loads(path.read_text(encoding="utf-8"))["model"]["vocab"]
    words = []
    for token, _ in sorted(vocab.items(), key=lambda item: item[1]):
        word = token[1:]
        wordlike = word.isascii() and word.isalpha() and word.islower()
        if token.startswith("\u2581") and wordlike and 3 <= len(word) <= 12:
            words.append(word)
    return words[:size]


class Corpus:
    """Notes of 40-140 words (one or two paragraphs) with 2-4 word titles and a source
    path, words drawn with a Zipf-like skew; the same text for every store."""

    def __init__(self, notes: int, queries: int, seed: int = 20260302) -> None:
        rng = random.Random(seed)
        self.words = vocabulary()
        weights = [1.0 / (rank + 10) for rank in range(len(self.words))]
        self.notes: list[tuple[str, str, str]] = []  # (title, source, content)
        for n in range(notes):
            title = " ".join(rng.choices(self.words, weights, k=rng.randint(2, 4))).capitalize()
            paragraphs = [
                " ".join(rng.choices(self.words, weights, k=rng.randint(20, 70))).capitalize() + "."
                for _ in range(rng.randint(1, 2))
            ]
            self.notes.append((title, f"folder{n % 50}/note{n}.md", "\n\n".join(paragraphs)))
        common, middle = self.words[:50], self.words[100:3000]
        self.queries = []
        for _ in range(queries):
            picked = rng.sample(middle, rng.randint(1, 2))
            if rng.random() < 0.5:
                picked.insert(0, rng.choice(common))
            self.queries.append(" ".join(picked))


class TableEmbedder:
    """The builtin embedder's name and size, answering from vectors computed up front (so
    a search times ranking, not the model). A text it was not given is an error."""

    def __init__(self, name: str, dimensions: int, table: dict[str, Vectors]) -> None:
        self.name = name
        self.dimensions = dimensions
        self.table = table

    async def start(self) -> None:
        return None

    async def embed(self, texts: Sequence[str]) -> Vectors:
        return np.stack([self.table[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)

    async def aclose(self) -> None:
        return None


# -- the run ------------------------------------------------------------------------------


async def build_sessiongate(
    workdir: Path, corpus: Corpus, table: dict[str, Vectors], embedder_name: str
) -> tuple[NoteService, NoteService, SQLiteStore]:
    store = SQLiteStore.open(workdir / "sessiongate.db")
    clock = ManualClock(datetime_start())
    config = NotesConfig()
    rows = SQLiteNoteStore(store)
    table_embedder = TableEmbedder(embedder_name, 256, table)
    fused = NoteService(rows, table_embedder, IdGenerator(clock), clock, config)
    for title, source, content in corpus.notes:
        await fused.add(OWNER, content, title=title, source=source)
        clock.advance(timedelta(milliseconds=1))
    # The keyword-only service is a gateway without `[notes] embeddings`.
    keyword = NoteService(rows, None, IdGenerator(clock), clock, config)
    return fused, keyword, store


def datetime_start() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def build_chroma(workdir: Path, corpus: Corpus, table: dict[str, Vectors], chunk_chars: int) -> Any:
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(workdir / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    # No embedding function: Chroma's default one would fetch a model; it gets vectors.
    collection = client.get_or_create_collection(
        "notes", embedding_function=None, metadata={"hnsw:space": "cosine"}
    )
    ids: list[str] = []
    vectors: list[Vectors] = []
    documents: list[str] = []
    metadatas: list[Any] = []
    for n, (title, source, content) in enumerate(corpus.notes):
        for seq, chunk in enumerate(chunk_text(content, chunk_chars)):
            ids.append(f"{n}:{seq}")
            vectors.append(table[f"{title}\n{chunk}"])
            documents.append(chunk)
            metadatas.append({"note": n, "title": title, "source": source, "seq": seq})
    batch = client.get_max_batch_size()
    for start in range(0, len(ids), batch):
        end = start + batch
        collection.add(
            ids=ids[start:end],
            embeddings=np.stack(vectors[start:end]),
            documents=documents[start:end],
            metadatas=metadatas[start:end],
        )
    return collection


async def measure(
    paths: Mapping[str, Callable[[str], Awaitable[Any]]], queries: list[str], warmup: int
) -> dict[str, list[int]]:
    timings: dict[str, list[int]] = {name: [] for name in paths}
    names = list(paths)
    for index, query in enumerate(queries[:warmup] + queries):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            started = time.perf_counter_ns()
            await paths[name](query)
            elapsed = time.perf_counter_ns() - started
            if index >= warmup:
                timings[name].append(elapsed)
    return timings


async def run(args: argparse.Namespace) -> int:
    ensure_bench_extras(["chromadb"])
    notes = args.notes or (2_000 if args.quick else 10_000)
    queries = args.queries or (150 if args.quick else 400)
    began = time.perf_counter()
    corpus = Corpus(notes, queries)
    config = NotesConfig()

    # Every text either store will embed: each chunk under its title, and each query.
    model = WordLlamaEmbedder()
    texts = [
        f"{title}\n{chunk}"
        for title, _, content in corpus.notes
        for chunk in chunk_text(content, config.chunk_chars)
    ]
    texts += corpus.queries
    embedded_at = time.perf_counter()
    vectors = await model.embed(texts)
    embed_seconds = time.perf_counter() - embedded_at
    table = dict(zip(texts, vectors, strict=True))
    chunks = len(texts) - len(corpus.queries)

    workdir = Path(tempfile.mkdtemp(prefix="notes-bench-"))
    try:
        loaded_at = time.perf_counter()
        fused, keyword, store = await build_sessiongate(workdir, corpus, table, model.name)
        sg_load = time.perf_counter() - loaded_at
        loaded_at = time.perf_counter()
        collection = build_chroma(workdir, corpus, table, config.chunk_chars)
        chroma_load = time.perf_counter() - loaded_at
        gc.collect()

        async def keyword_search(query: str) -> Any:
            return await keyword.search(OWNER, query, TOP_K)

        async def semantic_search(query: str) -> Any:
            return await fused.search(OWNER, query, TOP_K, keyword=False)

        async def fused_search(query: str) -> Any:
            return await fused.search(OWNER, query, TOP_K)

        async def chroma_search(query: str) -> Any:
            return collection.query(
                query_embeddings=[table[query]],
                n_results=TOP_K,
                include=["documents", "metadatas", "distances"],
            )

        paths = {
            "keyword": keyword_search,
            "semantic": semantic_search,
            "fused": fused_search,
            "chroma": chroma_search,
        }
        timings = await measure(paths, corpus.queries, warmup=min(30, len(corpus.queries)))
        exact = exact_index(corpus, table, config.chunk_chars)
        recall = await recall_at_k(fused, collection, table, exact, corpus.queries[:100])
        await store.close()
    finally:
        if args.keep:
            print(f"databases kept in {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    summary = {name: percentiles(values) for name, values in timings.items()}
    elapsed = time.perf_counter() - began
    print()
    print(f"notes_search — {'quick' if args.quick else 'full'} run, {elapsed:.1f} s")
    print(f"machine: {machine_line()}, load average {load_average():.2f}")
    print(
        f"versions: sessiongate (SQLite {sqlite_version()}),"
        f" chromadb {version_of('chromadb')}, wordllama {version_of('wordllama')},"
        f" numpy {version_of('numpy')}"
    )
    print(
        f"{notes:,} notes of one user -> {chunks:,} chunks, {len(corpus.queries)} queries,"
        f" top {TOP_K}; vectors: WordLlama 256-d, embedded once ({embed_seconds:.1f} s)"
    )
    print(
        f"load: sessiongate {sg_load:.1f} s (NoteService.add each note), chroma {chroma_load:.1f} s"
    )
    print()
    rows = [
        [name, f"{s['p50']:.3f}", f"{s['p90']:.3f}", f"{s['p99']:.3f}", f"{s['mean']:.3f}"]
        for name, s in summary.items()
    ]
    print("Query latency, milliseconds")
    print(render_table(["path", "p50", "p90", "p99", "mean"], rows, right={1, 2, 3, 4}))
    print()
    chroma = summary["chroma"]
    for name in ("keyword", "semantic", "fused"):
        print(
            f"  {name} / chroma: p50 x{summary[name]['p50'] / chroma['p50']:.2f},"
            f" p99 x{summary[name]['p99'] / chroma['p99']:.2f}"
        )
    print(
        f"  recall@{TOP_K} against the exact cosine top {TOP_K} (same vectors, 100 queries):"
        f" sessiongate semantic {recall[0]:.0%}, chroma {recall[1]:.0%}"
    )
    print()
    fused_p50 = summary["fused"]["p50"]
    print("Targets")
    print(
        f"  [{'PASS' if fused_p50 <= TARGET_FUSED_P50_MS else 'FAIL'}] fused p50"
        f" {fused_p50:.3f} ms <= {TARGET_FUSED_P50_MS:g} ms"
    )
    print(
        f"  [{'PASS' if fused_p50 <= chroma['p50'] else 'FAIL'}] fused p50 {fused_p50:.3f} ms"
        f" <= chroma p50 {chroma['p50']:.3f} ms"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "notes": notes,
                    "chunks": chunks,
                    "queries": len(corpus.queries),
                    "latency_ms": summary,
                    "recall_at_5": {"sessiongate_semantic": recall[0], "chroma": recall[1]},
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        print(f"\nresults written to {args.json}")
    print(f"notes_search_fused_p50_ms={fused_p50:.3f} chroma_p50_ms={chroma['p50']:.3f}")
    return 0


def exact_index(
    corpus: Corpus, table: dict[str, Vectors], chunk_chars: int
) -> tuple[list[tuple[str, int]], Vectors]:
    """Every chunk's (source, seq) and vector, for the brute-force reference ranking."""
    keys: list[tuple[str, int]] = []
    rows: list[Vectors] = []
    for title, source, content in corpus.notes:
        for seq, chunk in enumerate(chunk_text(content, chunk_chars)):
            keys.append((source, seq))
            rows.append(table[f"{title}\n{chunk}"])
    return keys, np.stack(rows)


def sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def percentiles(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": nearest_rank(ordered, 0.50) / 1e6,
        "p90": nearest_rank(ordered, 0.90) / 1e6,
        "p99": nearest_rank(ordered, 0.99) / 1e6,
        "mean": sum(ordered) / len(ordered) / 1e6,
    }


async def recall_at_k(
    fused: NoteService,
    collection: Any,
    table: dict[str, Vectors],
    exact: tuple[list[tuple[str, int]], Vectors],
    queries: list[str],
) -> tuple[float, float]:
    """Recall@5 of sessiongate's semantic ranking and of Chroma's, against the exact
    top 5 by cosine over the same vectors (brute force here, in numpy). HNSW is
    approximate; how approximate depends on its search breadth (`hnsw:search_ef`)."""
    keys, matrix = exact
    ours_found = chroma_found = total = 0
    for query in queries:
        best = np.argsort(-(matrix @ table[query]), kind="stable")[:TOP_K]
        truth = {keys[i] for i in best}
        ours = await fused.search(OWNER, query, TOP_K, keyword=False)
        ours_found += len(truth & {(h.source or "", h.seq) for h in ours.hits})
        theirs = collection.query(
            query_embeddings=[table[query]], n_results=TOP_K, include=["metadatas"]
        )
        chroma_found += len(truth & {(m["source"], m["seq"]) for m in theirs["metadatas"][0]})
        total += len(truth)
    return ours_found / total, chroma_found / total


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2,000 notes, 150 queries")
    parser.add_argument("--notes", type=int, help="notes of the one user (default 10,000)")
    parser.add_argument("--queries", type=int, help="measured queries per path")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary databases")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
