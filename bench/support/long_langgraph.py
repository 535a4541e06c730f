"""LangGraph's summarisation on long_conversation.py's stub: the peer of the gateway's
working set, driven as langchain's documentation shows it.

`langchain.agents.create_agent` with `ChatOpenAI` (langchain-openai, `streaming=True`,
`base_url` = the window stub, no retries), the same `lookup` tool as an async `@tool`,
an `InMemorySaver` checkpointer, and `SummarizationMiddleware` with the settings nearest
the gateway's defaults: summarise when the thread's estimate passes 0.75 of the window,
keep the newest 8 messages. The middleware counts with `count_tokens_approximately` (4 characters a
token) and has no correction from the provider's reported usage; the stub's tokenizer
counts 3.5, as a real tokenizer disagrees with any estimate.

One turn is `agent.ainvoke({"messages": [user]}, {"configurable": {"thread_id": ...}})`;
an exception is a failed turn (the stub's 400 `context_length_exceeded` is one). At the
end, the thread's state says what the middleware kept of the raw history: it replaces
the summarised messages in the state with one summary message (older states survive only
in the checkpointer's superseded checkpoints).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from typing import Any

KEEP_MESSAGES = 8
TRIGGER_FRACTION = 0.75


def available() -> bool:
    """Whether langchain's agents (with the middleware) are installed: the bench extra."""
    try:
        from langchain.agents.middleware import SummarizationMiddleware  # noqa: F401
    except ImportError:
        return False
    return True


async def run_langgraph(
    plan: Sequence[tuple[str, bool]], window: int, stub_url: str, lookup_text: Any
) -> dict[str, Any]:
    """Every turn of `plan` ((text, tool turn?) pairs) on one thread; the figures."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver

    @tool(description="Look up the record stored under a key.")
    async def lookup(key: str) -> str:
        return str(lookup_text(key))

    model = ChatOpenAI(
        base_url=stub_url + "/v1", api_key="bench", model="stub", max_retries=0, streaming=True
    )
    summariser = SummarizationMiddleware(
        model=model,
        trigger=("tokens", int(window * TRIGGER_FRACTION)),
        keep=("messages", KEEP_MESSAGES),
    )
    agent = create_agent(
        model=model, tools=[lookup], middleware=[summariser], checkpointer=InMemorySaver()
    )
    config: dict[str, Any] = {"configurable": {"thread_id": "long"}}
    failed, sent = 0, 0
    plain_times: list[float] = []
    cpu_times: list[float] = []
    errors: dict[str, int] = {}
    for text, _tool_turn in plan:
        started, cpu = time.perf_counter(), time.process_time()
        try:
            await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
        except Exception as exc:  # any failure is a failed turn, counted by its type
            failed += 1
            name = type(exc).__name__
            errors[name] = errors.get(name, 0) + 1
        elapsed = time.perf_counter() - started
        sent += 1
        if not _tool_turn:
            plain_times.append(elapsed)
            cpu_times.append(time.process_time() - cpu)
    state = await agent.aget_state(config)
    messages = state.values.get("messages", [])
    raw = sum(1 for m in messages if isinstance(m, AIMessage | ToolMessage | HumanMessage))
    summaries = sum(
        1 for m in messages if isinstance(m, HumanMessage) and "summary" in str(m.content)[:200]
    )
    early = statistics.median(plain_times[40:80]) if len(plain_times) >= 80 else 0.0
    late = statistics.median(plain_times[-40:]) if plain_times else 0.0
    cpu_early = statistics.median(cpu_times[40:80]) if len(cpu_times) >= 80 else 0.0
    cpu_late = statistics.median(cpu_times[-40:]) if cpu_times else 0.0
    return {
        "failed_turns": failed,
        "errors": errors,
        "messages_in_state": len(messages),
        "raw_messages_in_state": raw - summaries,
        "median_turn_ms_early": early * 1000,
        "median_turn_ms_late": late * 1000,
        "median_turn_cpu_ms_early": cpu_early * 1000,
        "median_turn_cpu_ms_late": cpu_late * 1000,
        "late_vs_early": cpu_late / cpu_early if cpu_early else float("nan"),
        "turns": sent,
    }
