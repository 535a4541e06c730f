"""The Responses API rows of gateway_load.py (issue 25): sessiongate's `POST /v1/responses`
beside its `POST /v1/chat/completions`, on the stacks the main phases ran on (the same
gateway process, the same stub), and LiteLLM's `/v1/responses` when its proxy serves it.

Each row is a closed loop of `sessions` sessions doing `turns` streamed turns back to back,
on a gateway that keeps the conversation, so the client sends only its new message:

* `chat_completions`: `/v1/chat/completions` with the session's `X-Session-Key`;
* `responses`: `/v1/responses` continuing the session's last response
  (`previous_response_id`);
* `responses_codex`: `/v1/responses` the way Codex CLI calls it (`store: false`, its
  session id in the `session-id` header, the whole conversation as `input` each time),
  which the gateway reconciles with the stored thread;
* `litellm_responses`: LiteLLM's `/v1/responses` (stateless: the client resends the last
  messages as `input`), when the proxy answers it.

Per row: turns/s, p50/p99 of a turn's whole time and of its first token, and the server's
CPU per turn (the stack's process tree, read before and after). The goal: a Responses turn
no more than 10 % slower than a chat-completions turn.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

#: What marks a token, the end and an error in each route's SSE bytes.
#: (A chat token is a delta with content only: the role chunk's empty content is not one.)
CHAT_TOKEN, CHAT_END = b'"delta":{"content":"', b"data: [DONE]"
RESPONSES_TOKEN = b"response.output_text.delta"
RESPONSES_END = b"event: response.completed"
RESPONSES_FAILED = b"event: response.failed"


@dataclass
class RowResult:
    name: str
    turns: int
    errors: int
    wall_s: float
    server_cpu_s: float
    totals_ms: list[float] = field(default_factory=list)
    ttfts_ms: list[float] = field(default_factory=list)
    first_error: str = ""

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.wall_s if self.wall_s else math.nan

    @property
    def cpu_ms_per_turn(self) -> float:
        return self.server_cpu_s * 1000 / self.turns if self.turns else math.nan


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


Request = Callable[[str, int], tuple[str, dict[str, str], bytes]]
After = Callable[[str, bytes], None]


@dataclass
class RowTarget:
    name: str
    url: str
    request: Request  # (session, turn) -> (path, headers, body)
    token: bytes
    end: bytes
    error: bytes
    after: After = field(default=lambda session, body: None)


def _text(session: str, turn: int) -> str:
    return f"turn {turn} on {session}: tell me something short about topic {turn * 7 % 13}."


def chat_target(url: str, key: str, agent: str) -> RowTarget:
    def request(session: str, turn: int) -> tuple[str, dict[str, str], bytes]:
        body = {
            "model": agent,
            "messages": [{"role": "user", "content": _text(session, turn)}],
            "stream": True,
        }
        headers = {"authorization": f"Bearer {key}", "x-session-key": f"chat-{session}"}
        return "/v1/chat/completions", headers, json.dumps(body).encode()

    return RowTarget("chat_completions", url, request, CHAT_TOKEN, CHAT_END, b'data: {"error"')


def _completed(raw: bytes) -> dict[str, Any] | None:
    """The response a stream ended with (`response.completed`), found in its data lines."""
    for line in reversed(raw.split(b"\n")):
        if line.startswith(b"data: ") and b'"response.completed"' in line:
            event = json.loads(line.removeprefix(b"data: "))
            if event.get("type") == "response.completed":
                return dict(event["response"])
    return None


def _completed_id(raw: bytes) -> str | None:
    found = _completed(raw)
    return None if found is None else str(found["id"])


def responses_target(url: str, key: str, agent: str) -> RowTarget:
    last: dict[str, str] = {}

    def request(session: str, turn: int) -> tuple[str, dict[str, str], bytes]:
        body: dict[str, Any] = {"model": agent, "input": _text(session, turn), "stream": True}
        if session in last:
            body["previous_response_id"] = last[session]
        return "/v1/responses", {"authorization": f"Bearer {key}"}, json.dumps(body).encode()

    def after(session: str, raw: bytes) -> None:
        found = _completed_id(raw)
        if found:
            last[session] = found

    return RowTarget(
        "responses", url, request, RESPONSES_TOKEN, RESPONSES_END, RESPONSES_FAILED, after
    )


def _answer_of(raw: bytes) -> str:
    output = (_completed(raw) or {}).get("output") or []
    return "".join(p.get("text", "") for item in output for p in item.get("content") or [])


def codex_target(url: str, key: str, agent: str, window: int = 50) -> RowTarget:
    history: dict[str, list[dict[str, str]]] = {}

    def request(session: str, turn: int) -> tuple[str, dict[str, str], bytes]:
        items = history.setdefault(session, [])
        items.append({"type": "message", "role": "user", "content": _text(session, turn)})
        body = {"model": agent, "input": items[-window:], "stream": True, "store": False}
        headers = {"authorization": f"Bearer {key}", "session-id": f"codex-{session}"}
        return "/v1/responses", headers, json.dumps(body).encode()

    def after(session: str, raw: bytes) -> None:
        answer = _answer_of(raw)
        history[session].append({"type": "message", "role": "assistant", "content": answer})

    return RowTarget(
        "responses_codex", url, request, RESPONSES_TOKEN, RESPONSES_END, RESPONSES_FAILED, after
    )


def litellm_target(url: str, key: str, model: str, window: int = 50) -> RowTarget:
    """LiteLLM's /v1/responses, stateless: the client resends its last messages."""
    target = codex_target(url, key, model, window)
    inner = target.request

    def request(session: str, turn: int) -> tuple[str, dict[str, str], bytes]:
        path, _, body = inner(session, turn)
        data = json.loads(body)
        data.pop("store", None)
        return path, {"authorization": f"Bearer {key}"}, json.dumps(data).encode()

    target.name, target.request = "litellm_responses", request
    target.end = b"response.completed"
    return target


async def _turn(client: httpx.AsyncClient, target: RowTarget, session: str, turn: int) -> Any:
    path, headers, body = target.request(session, turn)
    headers = {"content-type": "application/json", **headers}
    started = time.perf_counter()
    first = math.nan
    chunks: list[bytes] = []
    async with client.stream("POST", target.url + path, content=body, headers=headers) as resp:
        if resp.status_code != 200:
            detail = (await resp.aread())[:300].decode(errors="replace")
            return f"HTTP {resp.status_code}: {detail}"
        async for chunk in resp.aiter_raw():
            if math.isnan(first) and target.token in chunk:
                first = (time.perf_counter() - started) * 1000
            chunks.append(chunk)
    raw = b"".join(chunks)
    if target.end not in raw or target.error in raw:
        return f"no end marker or an error event: {raw[-300:]!r}"
    target.after(session, raw)
    return (time.perf_counter() - started) * 1000, first


async def run_row(
    target: RowTarget, cpu: Callable[[], float], *, sessions: int, turns: int, warmup: int = 2
) -> RowResult:
    clients = [httpx.AsyncClient(timeout=120) for _ in range(sessions)]
    names = [f"{target.name}-{index}-{time.time_ns()}" for index in range(sessions)]
    try:
        # Warm-up turns, not counted: the keys made, connections open, first reads cached.
        for turn in range(warmup):
            await asyncio.gather(
                *(_turn(c, target, n, turn) for c, n in zip(clients, names, strict=True))
            )
        result = RowResult(target.name, 0, 0, 0.0, 0.0)
        cpu_before, began = cpu(), time.perf_counter()

        async def session(client: httpx.AsyncClient, name: str) -> None:
            for turn in range(warmup, warmup + turns):
                got = await _turn(client, target, name, turn)
                if isinstance(got, str):
                    result.errors += 1
                    result.first_error = result.first_error or got
                    continue
                result.turns += 1
                result.totals_ms.append(got[0])
                result.ttfts_ms.append(got[1])

        await asyncio.gather(*(session(c, n) for c, n in zip(clients, names, strict=True)))
        result.wall_s = time.perf_counter() - began
        result.server_cpu_s = cpu() - cpu_before
        return result
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


def _merge(before: RowResult | None, more: RowResult) -> RowResult:
    if before is None:
        return more
    before.turns += more.turns
    before.errors += more.errors
    before.wall_s += more.wall_s
    before.server_cpu_s += more.server_cpu_s
    before.totals_ms += more.totals_ms
    before.ttfts_ms += more.ttfts_ms
    before.first_error = before.first_error or more.first_error
    return before


def _line(result: RowResult) -> str:
    return (
        f"  {result.name:<18} {result.turns:>5} {result.errors:>4} "
        f"{result.turns_per_s:>8.1f} {_pct(result.totals_ms, 0.5):>9.1f} "
        f"{_pct(result.totals_ms, 0.99):>9.1f} {_pct(result.ttfts_ms, 0.5):>9.1f} "
        f"{result.cpu_ms_per_turn:>9.2f}"
    )


def report(results: list[RowResult]) -> str:
    head = (
        f"  {'route':<18} {'turns':>5} {'err':>4} {'turns/s':>8} {'p50 ms':>9} "
        f"{'p99 ms':>9} {'ttft p50':>9} {'cpu ms/t':>9}"
    )
    lines = ["Responses API rows (closed loop, the conversation kept by the gateway)", head]
    lines += [_line(r) for r in results]
    by = {r.name: r for r in results}
    chat, resp = by.get("chat_completions"), by.get("responses")
    if chat and resp and chat.turns and resp.turns:
        cpu = resp.cpu_ms_per_turn / chat.cpu_ms_per_turn
        p50 = _pct(resp.totals_ms, 0.5) / _pct(chat.totals_ms, 0.5)
        verdict = "PASS" if max(cpu, p50) <= 1.10 else "FAIL"
        lines.append(
            f"  [{verdict}] a Responses turn within 10 % of a chat-completions turn: server CPU "
            f"{cpu:.2f}x, p50 turn time {p50:.2f}x"
        )
        lines.append(f"responses_vs_chat_cpu_ratio={cpu:.3f} responses_vs_chat_p50_ratio={p50:.3f}")
    for r in results:
        if r.first_error:
            lines.append(f"  {r.name}: {r.errors} failed turns, first: {r.first_error[:240]}")
    return "\n".join(lines)


async def responses_rows(
    stacks: Any, *, sessions: int = 10, turns: int = 20, agent: str = "main"
) -> list[RowResult]:
    """The rows on the running stacks: sessiongate's routes, then LiteLLM's if it is up."""
    servers = stacks.by_name()
    gateway = servers["sessiongate"]
    key = gateway.info["api_key"]
    targets = [
        chat_target(gateway.url, key, agent),
        responses_target(gateway.url, key, agent),
        codex_target(gateway.url, key, agent),
    ]
    # Each route twice, alternating, half the turns each time, added up: a machine that
    # gets busier or quieter during the run weighs on every route alike.
    merged: dict[str, RowResult] = {}
    for _ in range(2):
        for target in targets:
            got = await run_row(
                target, gateway.cpu_seconds, sessions=sessions, turns=max(1, turns // 2)
            )
            merged[target.name] = _merge(merged.get(target.name), got)
    results = list(merged.values())
    litellm = servers.get("litellm")
    if litellm is not None:
        from support.stub import STUB_MODEL

        target = litellm_target(litellm.url, litellm.info["api_key"], STUB_MODEL)
        results.append(await run_row(target, litellm.cpu_seconds, sessions=sessions, turns=turns))
    return results


def medians(results: list[RowResult]) -> dict[str, float]:
    return {r.name: statistics.median(r.totals_ms) if r.totals_ms else math.nan for r in results}
