"""The Responses API's `response` object and its streamed events, pure (DESIGN.md §14):
OpenAI's full sequence (`response.created`, `response.in_progress`, the output items,
their content parts and deltas, then `response.completed` | `.failed` | `.incomplete`),
each event with its `sequence_number`, as the official SDK's stream helper reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sessiongate.core.responses import call_item, message_item, output_items, usage_of


@dataclass(frozen=True, slots=True)
class ResponseShell:
    """What a response says of its request, whatever its outcome."""

    response_id: str
    created_at: int
    model: str
    instructions: str | None = None
    metadata: Mapping[str, str] | None = None
    tools: Sequence[Mapping[str, Any]] = ()
    tool_choice: Any = "auto"
    text_format: Mapping[str, Any] | None = None
    max_output_tokens: int | None = None
    previous_response_id: str | None = None
    store: bool = True
    parallel_tool_calls: bool = True
    conversation: str | None = None
    #: `include: ["reasoning.encrypted_content"]`: a reasoning block the upstream signed
    #: (Anthropic) carries its signature as `encrypted_content`; nothing is made up for
    #: reasoning that has none.
    encrypted_reasoning: bool = False
    #: The hosted tools (`web_search`) run as the agent's equivalents in this response:
    #: their calls are `web_search_call` items.
    hosted: tuple[str, ...] = ()

    def response(
        self,
        status: str,
        output: Sequence[Mapping[str, Any]] = (),
        usage: Mapping[str, Any] | None = None,
        error: Mapping[str, str] | None = None,
        incomplete: str | None = None,
    ) -> dict[str, Any]:
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": dict(error) if error else None,
            "incomplete_details": {"reason": incomplete} if incomplete else None,
            "instructions": self.instructions,
            "max_output_tokens": self.max_output_tokens,
            "model": self.model,
            "output": [dict(item) for item in output],
            "parallel_tool_calls": self.parallel_tool_calls,
            "previous_response_id": self.previous_response_id,
            "reasoning": {"effort": None, "summary": None},
            "store": self.store,
            "temperature": None,
            "text": {"format": dict(self.text_format or {"type": "text"})},
            "tool_choice": self.tool_choice if self.tool_choice is not None else "auto",
            "tools": [dict(tool) for tool in self.tools],
            "top_p": None,
            "truncation": "disabled",
            "usage": usage_of(usage) if usage is not None else None,
            "metadata": dict(self.metadata or {}),
            "conversation": {"id": self.conversation} if self.conversation else None,
        }


def finished(
    shell: ResponseShell,
    text: str,
    calls: Sequence[Mapping[str, str]],
    usage: Mapping[str, Any] | None,
    end_status: str,
) -> dict[str, Any]:
    """The whole response of a turn that ended: `completed`, or `incomplete` when the
    reply was cut (`truncated`: the model's output token limit, or the gateway's
    `max_reply_chars`; `interrupted`)."""
    incomplete = end_status in ("truncated", "interrupted")
    item_status = "incomplete" if incomplete else "completed"
    output = output_items(shell.response_id, text, calls, item_status)
    return shell.response(
        "incomplete" if incomplete else "completed",
        output,
        usage or {},
        incomplete="max_output_tokens" if incomplete else None,
    )


def failed(shell: ResponseShell, code: str, message: str) -> dict[str, Any]:
    return shell.response("failed", error={"code": code, "message": message})


def reasoning_item(
    item_id: str, text: str, status: str, encrypted: str | None = None
) -> dict[str, Any]:
    """A `reasoning` output item: the upstream's reasoning as one summary part;
    `encrypted_content` only when the client asked for it and the upstream signed it."""
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
        "status": status,
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def web_search_item(item_id: str, query: str, status: str) -> dict[str, Any]:
    """A `web_search_call` output item: the search the agent's equivalent tool ran."""
    action = {"type": "search", "query": query, "queries": [query] if query else []}
    return {"id": item_id, "type": "web_search_call", "status": status, "action": action}


def _query_of(arguments: object) -> str:
    """The search words of an equivalent tool's input (`query`, else its first string)."""
    if isinstance(arguments, Mapping):
        query = arguments.get("query")
        if isinstance(query, str):
            return query
        strings = [v for v in arguments.values() if isinstance(v, str)]
        return strings[0] if strings else ""
    return arguments if isinstance(arguments, str) else ""


class _Thinking:
    """One reasoning item as it streams."""

    __slots__ = ("index", "item_id", "part_open", "signature", "text")

    def __init__(self, item_id: str, index: int) -> None:
        self.item_id = item_id
        self.index = index
        self.text: list[str] = []
        self.signature: str | None = None
        self.part_open = False


class ResponseEvents:
    """One response's events in order, numbered from 0. Output items take the next
    output index as they open: reasoning items as the model reasons, the message at its
    first text, the function calls at the end."""

    def __init__(self, shell: ResponseShell) -> None:
        self.shell = shell
        self.sequence = 0
        self.text: list[str] = []
        self.message_open = False
        self.suffix = shell.response_id.removeprefix("resp_")
        self.message_id = f"msg_{self.suffix}"
        self.message_index = 0
        #: The items opened so far by output index (the message's slot holds None).
        self.items: list[dict[str, Any] | None] = []
        self.thinking: _Thinking | None = None
        #: Hosted calls running: call id → (item id, output index, query).
        self.searches: dict[str, tuple[str, int, str]] = {}
        self.encrypted_reasoning = shell.encrypted_reasoning

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def opening(self) -> list[dict[str, Any]]:
        shown = self.shell.response("in_progress")
        return [
            self._event("response.created", response=shown),
            self._event("response.in_progress", response=shown),
        ]

    # -- reasoning ------------------------------------------------------------------

    def reasoning(self, text: str, signature: str | None = None) -> list[dict[str, Any]]:
        """A piece of the model's reasoning; a signature ends its item."""
        events: list[dict[str, Any]] = []
        thinking = self.thinking
        if thinking is None and not text:
            return events  # a signature with nothing open: nothing to show
        if thinking is None:
            index = len(self.items)
            thinking = self.thinking = _Thinking(f"rs_{self.suffix}_{index}", index)
            self.items.append(reasoning_item(thinking.item_id, "", "in_progress"))
            item = reasoning_item(thinking.item_id, "", "in_progress")
            events.append(self._event("response.output_item.added", output_index=index, item=item))
        where = {"item_id": thinking.item_id, "output_index": thinking.index, "summary_index": 0}
        if text:
            if not thinking.part_open:
                thinking.part_open = True
                part = {"type": "summary_text", "text": ""}
                events.append(
                    self._event("response.reasoning_summary_part.added", part=part, **where)
                )
            thinking.text.append(text)
            events.append(self._event("response.reasoning_summary_text.delta", delta=text, **where))
        if signature is not None:
            thinking.signature = signature
            events.extend(self._close_thinking())
        return events

    def _close_thinking(self) -> list[dict[str, Any]]:
        thinking, self.thinking = self.thinking, None
        if thinking is None:
            return []
        text = "".join(thinking.text)
        where = {"item_id": thinking.item_id, "output_index": thinking.index, "summary_index": 0}
        events: list[dict[str, Any]] = []
        if thinking.part_open:
            part = {"type": "summary_text", "text": text}
            events.append(self._event("response.reasoning_summary_text.done", text=text, **where))
            events.append(self._event("response.reasoning_summary_part.done", part=part, **where))
        encrypted = thinking.signature if self.encrypted_reasoning else None
        item = reasoning_item(thinking.item_id, text, "completed", encrypted)
        self.items[thinking.index] = item
        events.append(
            self._event("response.output_item.done", output_index=thinking.index, item=item)
        )
        return events

    # -- hosted tools -----------------------------------------------------------------

    def hosted_start(self, call_id: str, name: str, arguments: object) -> list[dict[str, Any]]:
        """A hosted tool's equivalent started: its `web_search_call` item opens."""
        if name not in self.shell.hosted:
            return []
        events = self._close_thinking()
        index = len(self.items)
        item_id = f"ws_{self.suffix}_{index}"
        query = _query_of(arguments)
        self.searches[call_id] = (item_id, index, query)
        self.items.append(web_search_item(item_id, query, "completed"))
        where = {"item_id": item_id, "output_index": index}
        item = web_search_item(item_id, query, "in_progress")
        events.append(self._event("response.output_item.added", output_index=index, item=item))
        events.append(self._event("response.web_search_call.in_progress", **where))
        events.append(self._event("response.web_search_call.searching", **where))
        return events

    def hosted_end(self, call_id: str, status: str) -> list[dict[str, Any]]:
        found = self.searches.pop(call_id, None)
        if found is None:
            return []
        item_id, index, query = found
        item = web_search_item(item_id, query, "completed" if status == "ok" else "failed")
        self.items[index] = item
        where = {"item_id": item_id, "output_index": index}
        return [
            self._event("response.web_search_call.completed", **where),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    # -- the message ------------------------------------------------------------------

    def _open_message(self) -> list[dict[str, Any]]:
        self.message_open = True
        self.message_index = len(self.items)
        self.items.append(None)
        item = message_item(self.message_id, "", "in_progress")
        item["content"] = []
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        where = {"item_id": self.message_id, "output_index": self.message_index}
        return [
            self._event("response.output_item.added", output_index=self.message_index, item=item),
            self._event("response.content_part.added", content_index=0, part=part, **where),
        ]

    def delta(self, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        events = self._close_thinking()
        if not self.message_open:
            events.extend(self._open_message())
        self.text.append(text)
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=self.message_id,
                output_index=self.message_index,
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return events

    def _close_message(self, status: str) -> list[dict[str, Any]]:
        text = "".join(self.text)
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        where = {"item_id": self.message_id, "output_index": self.message_index}
        return [
            self._event(
                "response.output_text.done", content_index=0, text=text, logprobs=[], **where
            ),
            self._event("response.content_part.done", content_index=0, part=part, **where),
            self._event(
                "response.output_item.done",
                output_index=self.message_index,
                item=message_item(self.message_id, text, status),
            ),
        ]

    def end(
        self, calls: Sequence[Mapping[str, str]], usage: Mapping[str, Any], end_status: str
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The closing events and the whole response."""
        events = self._close_thinking()
        response = finished(self.shell, "".join(self.text), calls, usage, end_status)
        if not self.message_open and not calls:
            events.extend(self._open_message())
        answer = [item for item in response["output"] if item["type"] == "message"]
        if self.message_open:
            events.extend(self._close_message(answer[0]["status"]))
        output: list[dict[str, Any]] = []
        for item in self.items:
            output.extend(answer if item is None else [item])
        first = len(self.items)
        for index, call in enumerate(calls):
            item_id = f"fc_{self.suffix}_{index}"
            where = {"item_id": item_id, "output_index": first + index}
            added = {**call_item(item_id, call, "in_progress"), "arguments": ""}
            events.append(
                self._event("response.output_item.added", output_index=first + index, item=added)
            )
            events.append(
                self._event(
                    "response.function_call_arguments.delta", delta=call["arguments"], **where
                )
            )
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    arguments=call["arguments"],
                    name=call["name"],
                    **where,
                )
            )
            done = call_item(item_id, call)
            output.append(done)
            events.append(
                self._event("response.output_item.done", output_index=first + index, item=done)
            )
        response["output"] = output
        kind = "response.completed" if response["status"] == "completed" else "response.incomplete"
        events.append(self._event(kind, response=response))
        return events, response

    def failure(self, code: str, message: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        response = failed(self.shell, code, message)
        return [self._event("response.failed", response=response)], response


def replay(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A kept response's events: the same kinds in the same order, its text in one delta
    (numbered from 0; the original stream's numbers are not kept), ending with the kept
    response itself."""
    shell = ResponseShell(
        str(body["id"]), int(body.get("created_at") or 0), str(body.get("model", ""))
    )
    events = ResponseEvents(shell)
    out = events.opening()
    calls: list[dict[str, str]] = []
    for item in body.get("output") or []:
        if item.get("type") == "web_search_call":
            action = item.get("action") or {}
            events.shell = replace(events.shell, hosted=("web_search",))
            call_id = str(item.get("id", ""))
            out.extend(events.hosted_start(call_id, "web_search", {"query": action.get("query")}))
            out.extend(
                events.hosted_end(call_id, "ok" if item.get("status") == "completed" else "")
            )
        elif item.get("type") == "reasoning":
            summary = "".join(str(p.get("text", "")) for p in item.get("summary") or [])
            out.extend(events.reasoning(summary))
            out.extend(events._close_thinking())
        elif item.get("type") == "message":
            for part in item.get("content") or []:
                out.extend(events.delta(str(part.get("text", ""))))
        elif item.get("type") == "function_call":
            calls.append(
                {"id": item["call_id"], "name": item["name"], "arguments": item["arguments"]}
            )
    closing, _ = events.end(calls, {}, "complete")
    closing[-1] = {**closing[-1], "type": f"response.{body.get('status', 'completed')}"}
    closing[-1]["response"] = dict(body)
    for event in closing:
        out.append(event)
    return out
