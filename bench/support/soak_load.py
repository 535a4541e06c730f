"""The clients of bench/scale_soak.py (they run in the orchestrating process): turns over
REST with an `Idempotency-Key` each, retried on the next gateway when one fails (as a
client behind a load balancer would be), WebSocket listeners that fail over too, the
throughput loops, the quota burst, and the check of every key's stored history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from support.soak_cluster import Gateway
from support.soak_stub import reply_to

#: How long a turn keeps being retried (over every gateway) before it counts as failed.
TURN_DEADLINE_S = 120.0


@dataclass
class TurnResult:
    key: str
    content: str
    ok: bool
    attempts: int
    error: str = ""


@dataclass
class Clients:
    """One HTTP client per gateway (connections kept alive), all as one user."""

    gateways: list[Gateway]
    api_key: str
    concurrency: int
    _clients: list[httpx.AsyncClient] = field(default_factory=list)

    async def __aenter__(self) -> Clients:
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=64)
        headers = {"Authorization": f"Bearer {self.api_key}"}
        self._clients = [
            httpx.AsyncClient(base_url=g.url, headers=headers, timeout=60, limits=limits)
            for g in self.gateways
        ]
        return self

    async def __aexit__(self, *_: object) -> None:
        for client in self._clients:
            await client.aclose()

    async def turn(
        self, home: int, key: str, content: str, idempotency_key: str | None
    ) -> TurnResult:
        """One turn, first on gateway `home`, then on the others in turn while it fails
        (a refused connection, a reset, a 5xx, a 409 for a key still running elsewhere)."""
        deadline = time.monotonic() + TURN_DEADLINE_S
        attempt = 0
        error = ""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        body = {"content": content, "stream": False}
        while time.monotonic() < deadline:
            client = self._clients[(home + attempt) % len(self._clients)]
            attempt += 1
            try:
                response = await client.post(
                    f"/v1/sessions/{key}/messages", json=body, headers=headers
                )
            except httpx.TransportError as exc:
                error = type(exc).__name__
                await asyncio.sleep(min(0.05 * attempt, 1.0))
                continue
            if response.status_code == 200:
                return TurnResult(key, content, True, attempt)
            error = f"{response.status_code} {_code(response)}"
            if response.status_code == 409 or response.status_code >= 500:
                await asyncio.sleep(min(0.1 * attempt, 1.0))
                continue
            return TurnResult(key, content, False, attempt, error)
        return TurnResult(key, content, False, attempt, error or "deadline")


def _code(response: httpx.Response) -> str:
    with contextlib.suppress(ValueError, KeyError, TypeError):
        return str(response.json()["error"]["code"])
    return ""


# -- throughput ---------------------------------------------------------------------------------


async def closed_loop(clients: Clients, active: int, turns: int, tag: str) -> tuple[float, int]:
    """`clients.concurrency` workers, worker w on gateway w % `active` and its own key,
    `turns` turns in all; (turns per second, failed turns)."""
    remaining = turns
    failed = 0

    async def worker(w: int) -> None:
        nonlocal remaining, failed
        n = 0
        while remaining > 0:
            remaining -= 1
            result = await clients.turn(w % active, f"{tag}:{w}", f"{tag} {w} {n}", None)
            failed += not result.ok
            n += 1

    began = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(clients.concurrency)))
    wall = time.perf_counter() - began
    return (turns - failed) / wall, failed


# -- the soak -----------------------------------------------------------------------------------


@dataclass
class Listener:
    """A WebSocket on one key, on one gateway; after a drop it reconnects to the next
    gateway, and the `ready` frame's history counts as seen (what a client redraws)."""

    key: str
    home: int
    seen: set[str] = field(default_factory=set)
    reconnects: int = 0
    stopping: bool = False

    async def run(self, gateways: Sequence[Gateway], api_key: str) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import WebSocketException

        index = self.home
        while not self.stopping:
            gateway = gateways[index % len(gateways)]
            try:
                async with connect(
                    f"{gateway.ws_url}/v1/ws?session_id={self.key}",
                    open_timeout=10,
                    close_timeout=1,
                    proxy=None,
                    max_size=2**24,
                ) as ws:
                    await ws.send(api_key)
                    if await asyncio.wait_for(ws.recv(), 10) != "authenticated":
                        raise RuntimeError("not authenticated")
                    ready = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    for item in ready.get("history", []):
                        if item.get("role") == "user":
                            self.seen.add(str(item.get("content")))
                    while not self.stopping:
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 0.5)
                        except TimeoutError:
                            continue
                        frame = json.loads(raw)
                        if frame.get("type") == "user_message":
                            self.seen.add(str(frame.get("content")))
            except (OSError, TimeoutError, WebSocketException, RuntimeError):
                if self.stopping:
                    return
                self.reconnects += 1
                index += 1
                await asyncio.sleep(0.05)


@dataclass
class SoakPlan:
    turns: int
    keys: int
    watched_keys: int
    kill_at: float  # fraction of the turns issued when one gateway is killed
    down_s: float  # how long it stays down


@dataclass
class SoakOutcome:
    results: list[TurnResult]
    listeners: list[Listener]
    wall_s: float
    killed: str
    kill_seen_s: float


def key_name(n: int) -> str:
    return f"soak:{n:03d}"


async def soak(
    clients: Clients,
    gateways: list[Gateway],
    api_key: str,
    plan: SoakPlan,
    restart: Callable[[Gateway], None],
) -> SoakOutcome:
    listeners = [Listener(key_name(k), k % len(gateways)) for k in range(plan.watched_keys)]
    listening = [asyncio.create_task(li.run(gateways, api_key)) for li in listeners]
    await asyncio.sleep(1.0)  # every socket open before the first turn
    issued = 0
    results: list[TurnResult] = []
    victim = gateways[-1]
    killed_at: float | None = None
    kill_task: asyncio.Task[None] | None = None

    async def kill_and_restart() -> None:
        nonlocal killed_at
        killed_at = time.perf_counter()
        victim.kill()
        await asyncio.sleep(plan.down_s)
        await asyncio.to_thread(restart, victim)

    async def worker(w: int) -> None:
        nonlocal issued, kill_task
        while issued < plan.turns:
            n = issued
            issued += 1
            if kill_task is None and n >= plan.turns * plan.kill_at:
                kill_task = asyncio.create_task(kill_and_restart())
            key = n % plan.keys
            content = f"soak k{key:03d} t{n:05d}"
            home = w % len(gateways)
            results.append(await clients.turn(home, key_name(key), content, f"soak-{n}"))

    began = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(clients.concurrency)))
    wall = time.perf_counter() - began
    if kill_task is not None:
        await kill_task
    await asyncio.sleep(2.0)  # the last broadcasts reach their sockets
    for li in listeners:
        li.stopping = True
    await asyncio.gather(*listening, return_exceptions=True)
    return SoakOutcome(
        results, listeners, wall, victim.name, (killed_at - began) if killed_at else -1.0
    )


# -- the checks ---------------------------------------------------------------------------------


@dataclass
class HistoryCheck:
    lost: int = 0
    duplicated: int = 0
    interleaved: int = 0
    answered: dict[str, set[str]] = field(default_factory=dict)
    #: Of the duplicates: copies left unanswered by a turn cut short (its gateway killed)
    #: whose retry was then answered once; the rest would be turns answered twice.
    cut: int = 0
    messages: int = 0
    examples: list[str] = field(default_factory=list)


async def check_histories(
    database_url: str, owner: str, keys: int, issued: Sequence[TurnResult]
) -> HistoryCheck:
    """Every key's stored chain, in order: each issued message stored exactly once (else
    lost, or duplicated), each user message followed at once by its own answer and each
    answer preceded by its question (else interleaved)."""
    import asyncpg

    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT s.key, m.role, m.content FROM messages m"
            " JOIN segments s ON s.session_id = m.segment_id"
            " WHERE s.key LIKE $1 ORDER BY s.key, s.pos, m.seq",
            f"{owner}/soak:%",
        )
    finally:
        await conn.close()
    check = HistoryCheck(messages=len(rows))
    by_key: dict[str, list[tuple[str, str]]] = {}
    for key, role, content in rows:
        by_key.setdefault(str(key).split("/", 1)[1], []).append((str(role), str(content)))
    counts: dict[str, int] = {}
    answers: dict[str, int] = {}
    for key, thread in by_key.items():
        answered = check.answered.setdefault(key, set())
        for i, (role, content) in enumerate(thread):
            if role == "user":
                counts[content] = counts.get(content, 0) + 1
                following = thread[i + 1] if i + 1 < len(thread) else None
                if following == ("assistant", reply_to(content)):
                    answered.add(content)
                    answers[content] = answers.get(content, 0) + 1
                else:
                    check.interleaved += 1
                    if len(check.examples) < 5:
                        check.examples.append(f"{key}: {content!r} then {following!r}")
            elif role == "assistant":
                before = thread[i - 1] if i > 0 else None
                if before is None or before[0] != "user" or reply_to(before[1]) != content:
                    check.interleaved += 1
                    if len(check.examples) < 5:
                        check.examples.append(f"{key}: answer {content!r} after {before!r}")
    for result in issued:
        stored = counts.get(result.content, 0)
        if stored == 0 or result.content not in check.answered.get(result.key, set()):
            check.lost += 1
        check.duplicated += max(0, stored - 1)
        if stored > 1 and answers.get(result.content, 0) == 1:
            check.cut += stored - 1
    return check


def missed_broadcasts(listeners: Sequence[Listener], check: HistoryCheck) -> int:
    """Turns answered on a watched key that its listener never saw."""
    return sum(len(check.answered.get(li.key, set()) - li.seen) for li in listeners)


# -- quotas -------------------------------------------------------------------------------------


async def quota_burst(
    gateways: Sequence[Gateway], keys: dict[str, str], limit: int, per_user: int
) -> dict[str, int]:
    """Each user sends `per_user` turns at once, spread over every gateway, inside one UTC
    minute; how many each had admitted (200)."""
    now = time.time()
    if now % 60 > 45:  # the burst must not straddle two quota windows
        await asyncio.sleep(60 - now % 60 + 0.5)
    admitted: dict[str, int] = {}

    async def user_burst(user: str, api_key: str) -> None:
        headers = {"Authorization": f"Bearer {api_key}"}
        async with contextlib.AsyncExitStack() as stack:
            made = [
                await stack.enter_async_context(
                    httpx.AsyncClient(base_url=g.url, headers=headers, timeout=60)
                )
                for g in gateways
            ]

            async def one(n: int) -> int:
                response = await made[n % len(made)].post(
                    f"/v1/sessions/quota:{n % 4}/messages",
                    json={"content": f"quota {user} {n}", "stream": False},
                )
                return response.status_code

            statuses = await asyncio.gather(*(one(n) for n in range(per_user)))
        admitted[user] = sum(s == 200 for s in statuses)
        unexpected = [s for s in statuses if s not in (200, 429)]
        if unexpected:
            raise RuntimeError(f"quota burst: unexpected statuses {unexpected[:5]}")

    await asyncio.gather(*(user_burst(u, k) for u, k in keys.items()))
    return admitted


def quota_overrun(admitted: dict[str, int], limit: int) -> int:
    """The most requests any one user had admitted beyond the limit."""
    return max((max(0, n - limit) for n in admitted.values()), default=0)


def describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items())
