"""The LangGraph peer stack (seed 002's FastAPI + LangGraph design, reduced to one turn).

FastAPI + `StateGraph(MessagesState)` with one async node that streams the stub over httpx,
pushes each token through `get_stream_writer()` and appends the `AIMessage`; compiled with
`AsyncSqliteSaver`; `POST /chat {thread_id, content}` answers `event: token` SSE frames
from `graph.astream(..., stream_mode="custom")`. It is leaner than seed 002 (one node, no
auth, custom stream mode instead of `astream_events`) and sends the whole thread upstream.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any, cast

from pydantic import BaseModel

from support.stub import STUB_MODEL


class BaselineChatIn(BaseModel):
    """The baseline's request body (module level, so FastAPI can resolve the annotation)."""

    thread_id: str
    content: str


def build_baseline_app(stub_url: str, db_path: str) -> Any:
    import httpx
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.config import get_stream_writer
    from langgraph.graph import END, START, MessagesState, StateGraph

    roles = {"human": "user", "ai": "assistant", "system": "system"}
    url = f"{stub_url}/v1/chat/completions"
    state: dict[str, Any] = {}

    async def call_model(graph_state: MessagesState) -> dict[str, Any]:
        writer = get_stream_writer()
        wire = [
            {"role": roles.get(m.type, "user"), "content": str(m.content)}
            for m in graph_state["messages"]
        ]
        body = {"model": STUB_MODEL, "messages": wire, "stream": True}
        parts: list[str] = []
        async with state["http"].stream("POST", url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    continue  # read on to the end of the body, so the connection is reused
                for choice in json.loads(data).get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        parts.append(text)
                        writer({"token": text})
        return {"messages": [AIMessage("".join(parts))]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", cast(Any, call_model))  # the overloads reject a plain async def
    builder.add_edge(START, "model")
    builder.add_edge("model", END)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            AsyncSqliteSaver.from_conn_string(db_path) as saver,
            httpx.AsyncClient(
                timeout=httpx.Timeout(120, connect=10),
                limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
            ) as http,
        ):
            await saver.setup()
            state["http"] = http
            state["graph"] = builder.compile(checkpointer=saver)
            yield

    app = FastAPI(lifespan=lifespan)

    def frame(kind: str, payload: dict[str, Any]) -> bytes:
        data = json.dumps({"type": kind, **payload}, separators=(",", ":"))
        return f"event: {kind}\ndata: {data}\n\n".encode()

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/chat")
    async def chat(body: BaselineChatIn) -> StreamingResponse:
        config: Any = {"configurable": {"thread_id": body.thread_id}}
        graph = state["graph"]

        async def frames() -> AsyncIterator[bytes]:
            yield frame("start", {"thread_id": body.thread_id})
            count = 0
            try:
                async for chunk in graph.astream(
                    {"messages": [HumanMessage(body.content)]}, config, stream_mode="custom"
                ):
                    count += 1
                    yield frame("token", {"content": chunk["token"]})
            except Exception as exc:  # the stream must end with a frame, not hang
                yield frame("error", {"code": "internal_error", "message": repr(exc)})
                return
            yield frame("end", {"tokens": count})

        return StreamingResponse(frames(), media_type="text/event-stream")

    return app
