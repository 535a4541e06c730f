"""Conversation matching: what finding an OpenAI client's conversation costs as one user's
stored conversations grow (DESIGN.md §11, service/conversation/locate.py).

An OpenAI client without `X-Session-Key` or a conversation id sends its whole message
list; the gateway hashes every prefix of it (core/conversation.py) and asks the
conversation index for a stored conversation the list continues. One user gets N stored
conversations (10 and 10,000 by default), each three turns long (six messages, distinct
text), written straight into the conversation index of a real engine. Then, per request:

* **continue**: a conversation's six messages plus a new user message (the everyday
  request): found by its head;
* **earlier state**: its first two messages plus an edited user message (what a
  regenerate or an edit sends): found by its deepest stored prefix;
* **unknown**: a list with an answer no stored conversation holds: both look-ups miss
  and a new conversation would start.

Each timing is `prefix_hashes` of the list plus `ConversationService.locate`, wall time
(time.perf_counter_ns) per call, after a warm-up, the request kinds and conversations
interleaved; p50 and p99 are nearest-rank.

    .venv/bin/python bench/conversation_match.py                 # SQLite, 10 and 10,000
    .venv/bin/python bench/conversation_match.py --postgres URL  # and a scratch PostgreSQL db
    .venv/bin/python bench/conversation_match.py --sizes 10 1000 --requests 500

The last line printed is always
`conversation_match_p50_us_small=<x> conversation_match_p50_us_large=<y> ratio=<r>`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from sessiongate.config import Settings
from sessiongate.core.conversation import ClientMessage, Role, chain, prefix_hashes
from sessiongate.core.keys import KeyRef
from sessiongate.core.users import Caller
from sessiongate.service.conversation.locate import ConversationService
from sessiongate.service.engine import Engine, build_engine
from sessiongate.store.conversations import ConversationHead, ConversationNode
from support.common import load_average, machine_line, nearest_rank, render_table

USER = "bench"
KINDS = ("continue", "earlier state", "unknown")


def conversation(index: int) -> list[ClientMessage]:
    """Three turns with text of their own (a real model's answers differ)."""
    messages = []
    for turn in range(3):
        messages.append(ClientMessage(Role.USER, f"question {turn} of conversation {index}"))
        messages.append(
            ClientMessage(Role.ASSISTANT, f"answer {turn} to conversation {index}, at length")
        )
    return messages


async def populate(service: ConversationService, count: int) -> None:
    for index in range(count):
        key = KeyRef(USER, f"oai:chat:bench-{index}")
        nodes = []
        parent = ""
        for position, message in enumerate(conversation(index), start=1):
            node_hash = chain(parent, message)
            nodes.append(
                ConversationNode(key, node_hash, parent, position, message.role.value, None, ())
            )
            parent = node_hash
        await service.index.record(nodes, ConversationHead(key, parent, len(nodes)))


def request(kind: str, index: int) -> list[ClientMessage]:
    messages = conversation(index)
    if kind == "continue":
        return [*messages, ClientMessage(Role.USER, "and one more thing")]
    if kind == "earlier state":
        return [*messages[:2], ClientMessage(Role.USER, "question 1, edited")]
    return [
        ClientMessage(Role.USER, "hello"),
        ClientMessage(Role.ASSISTANT, f"an answer nobody stored {index}"),
        ClientMessage(Role.USER, "more"),
    ]


async def measure(
    service: ConversationService, count: int, requests: int, seed: int
) -> dict[str, list[int]]:
    caller = Caller(USER)
    rng = random.Random(seed)
    plan = [(KINDS[i % len(KINDS)], rng.randrange(count)) for i in range(requests)]
    timings: dict[str, list[int]] = {kind: [] for kind in KINDS}
    for kind, index in plan[:200]:  # warm-up: caches, the page cache, the planner
        messages = request(kind, index)
        await service.locate(caller, messages, prefix_hashes(messages))
    for kind, index in plan:
        messages = request(kind, index)
        started = time.perf_counter_ns()
        key, _ = await service.locate(caller, messages, prefix_hashes(messages))
        timings[kind].append(time.perf_counter_ns() - started)
        expected = f"oai:chat:bench-{index}"
        if (kind == "unknown") == (key == expected):
            raise AssertionError(f"{kind} request for conversation {index} found {key}")
    return timings


async def run_backend(
    name: str, server: str, sizes: list[int], requests: int, work: Path
) -> list[tuple[str, int, str, float, float]]:
    """`server`: "" for SQLite, else a PostgreSQL server URL (a scratch database each)."""
    results = []
    for size in sizes:
        folder = work / f"{name}-{size}"
        folder.mkdir()
        url = await _scratch_database(server) if server else ""
        settings = Settings(data_dir=folder, database={"url": url}, lifecycle={"timezone": "UTC"})
        engine: Engine = build_engine(settings)
        try:
            await engine.start()
            service = engine.conversations
            assert service is not None
            loaded = time.perf_counter()
            await populate(service, size)
            print(f"{name}: {size} conversations loaded in {time.perf_counter() - loaded:.1f} s")
            timings = await measure(service, size, requests, seed=size)
            for kind in KINDS:
                values = sorted(timings[kind])
                results.append(
                    (
                        name,
                        size,
                        kind,
                        nearest_rank(values, 0.5) / 1000,
                        nearest_rank(values, 0.99) / 1000,
                    )
                )
        finally:
            await engine.aclose()
            if url:
                await _drop_database(server, url)
    return results


async def _scratch_database(server: str) -> str:
    """A new database on the PostgreSQL server `server` names (dropped afterwards)."""
    import asyncpg

    name = f"sg_bench_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    parts = urlsplit(server)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


async def _drop_database(server: str, url: str) -> None:
    import asyncpg

    admin = await asyncpg.connect(server)
    try:
        name = urlsplit(url).path.lstrip("/")
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 10_000])
    parser.add_argument("--requests", type=int, default=3000, help="timed requests per size")
    parser.add_argument("--postgres", metavar="URL", help="also measure this PostgreSQL database")
    args = parser.parse_args()
    print(machine_line())
    work = Path(tempfile.mkdtemp(prefix="conversation-match-"))
    try:
        results = asyncio.run(run_backend("sqlite", "", args.sizes, args.requests, work))
        if args.postgres:
            results += asyncio.run(
                run_backend("postgres", args.postgres, args.sizes, args.requests, work)
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        [store, f"{size:,}", kind, f"{p50:.1f}", f"{p99:.1f}"]
        for store, size, kind, p50, p99 in results
    ]
    print(render_table(["store", "conversations", "request", "p50 µs", "p99 µs"], rows, {1, 3, 4}))
    print(f"1-minute load average after the run: {load_average():.2f}")
    small, large = min(args.sizes), max(args.sizes)
    p50 = {(size, kind): value for store, size, kind, value, _ in results if store == "sqlite"}
    for kind in KINDS:
        ratio = p50[(large, kind)] / p50[(small, kind)]
        print(f"sqlite {kind}: p50 at {large:,} ÷ p50 at {small:,} = {ratio:.2f}")
    base, grown = p50[(small, "continue")], p50[(large, "continue")]
    print(
        f"conversation_match_p50_us_small={base:.1f} conversation_match_p50_us_large={grown:.1f}"
        f" ratio={grown / base:.2f}"
    )


if __name__ == "__main__":
    main()
