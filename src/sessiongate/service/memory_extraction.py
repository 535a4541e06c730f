"""Memory extraction (`[agents.<name>.memory] extract = true`, DESIGN.md §13,
docs/memory.md): the control model keeps the user's memory items up to date from what
they say, after each turn and before a compaction.

- After a turn. An after-turn listener (service/turn/after.py): in the background, once
  the reply is kept, so it never delays or changes a reply. The model reads the exchange
  (the turn's user message and reply) and the user's most similar items.
- Before a compaction. The compactor (service/compaction.py) hands over the span it is
  about to summarise; the messages of it no after-turn extraction of this process has read
  yet (all of them after a restart, or for an agent that just turned extraction on) are
  read in parts of at most MAX_SPAN_CHARS, in the background, so nothing learned in a
  conversation is lost when its raw messages leave the context. The raw messages stay in
  the store either way.

The answer is read strictly (core/memory_extraction.py): a malformed one changes nothing
and is logged (never with the answer's or the conversation's text). The changes go
through the memory service (service/memory.py) with `created_by = "extraction"` and the
key, segment and messages read as their source: an `update` supersedes (never
overwrites), a `delete` invalidates (the item stays in the history). The user's own edits
win: an item the user edited after it came from these messages is left alone, and a text
the user forgot or edited away from them is not added back.

Each extraction that changed something queues a `memory` event, announced by the next
turn on the key (as a compaction is: core/events.py `MemoryEvent`), and a `memory.changed`
hook. A model that fails or times out changes nothing; the next turn is read as usual.
Extractions of one user run one at a time in this process.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from sessiongate.core.events import MemoryEvent
from sessiongate.core.keys import KeyRef
from sessiongate.core.memory import (
    MAX_MEMORY_QUERY_CHARS,
    MemoryItem,
    MemorySource,
    applies_to,
    source_matches,
)
from sessiongate.core.memory_extraction import (
    MAX_ANSWER_CHARS,
    MAX_SHOWN_ITEMS,
    Change,
    MalformedAnswer,
    ShownItem,
    SpanMessage,
    UserOverrides,
    extraction_messages,
    parse_memory_answer,
    plan_changes,
    split_span,
)
from sessiongate.core.segments import Message, Role
from sessiongate.errors import ConfigError, ModelError, SessionGateError
from sessiongate.models.answers import answer_options, read_answer
from sessiongate.models.base import ReplyModel
from sessiongate.service.agents import AgentProfile
from sessiongate.service.hooks import COMPLETED, HookService
from sessiongate.service.memory import MemoryService
from sessiongate.service.turn.handle import FinishedTurn
from sessiongate.store.base import Store

log = logging.getLogger(__name__)

#: The longest one model may take to answer before the next in the chain is asked.
EXTRACTION_TIMEOUT = timedelta(seconds=60)
#: The newest messages of a segment searched for a finished turn's own messages.
TURN_LOOKBACK = 40
#: A source names at most this many messages (core/memory.py MAX_SOURCE_MESSAGES).
MAX_SOURCE_IDS = 100
#: Keys with announcements waiting, and announcements per key, kept at most (a key never
#: used again must not hold memory forever).
MAX_NEWS_KEYS = 4096
MAX_NEWS_PER_KEY = 20
#: Segments whose read position this process remembers.
MAX_READ_MARKS = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


class MemoryExtractor:
    def __init__(
        self,
        agents: Mapping[str, AgentProfile],
        models: Mapping[str, ReplyModel],
        memory: MemoryService,
        store: Store,
        *,
        hooks: HookService | None = None,
        timeout: timedelta | None = None,
    ) -> None:
        self.agents = agents
        self.models = models
        self.memory = memory
        self.store = store
        self.hooks = hooks
        self.timeout = timeout or EXTRACTION_TIMEOUT
        self._owner_locks: dict[str, asyncio.Lock] = {}
        #: Per key (storage id), the `memory` events the next turn announces.
        self._news: OrderedDict[str, list[MemoryEvent]] = OrderedDict()
        #: Per segment, the seqs of the messages an extraction of this process has read.
        self._read: OrderedDict[str, set[int]] = OrderedDict()
        self._running: set[asyncio.Task[None]] = set()

    # -- which turns ------------------------------------------------------------------

    def model_chain(self, agent: AgentProfile) -> list[str]:
        """The models asked, in order: `extract_model`, else the control model and its
        fallbacks."""
        name = agent.memory.extract_model or agent.control_model
        if name is None:
            return []
        names = [name]
        if name == agent.control_model:
            names += [n for n in agent.control_fallback_models if n != name]
        return names

    def wants(self, agent_name: str) -> AgentProfile | None:
        agent = self.agents.get(agent_name)
        if agent is None or not agent.memory.extract or not self.model_chain(agent):
            return None
        return agent

    # -- after a turn -----------------------------------------------------------------

    async def __call__(self, finished: FinishedTurn) -> None:
        """The after-turn listener."""
        agent = self.wants(finished.agent)
        if agent is None or finished.session_id is None:
            return
        if finished.status not in COMPLETED or not finished.reply_text or finished.offline:
            return  # the offline stand-in only says the model is unavailable
        messages = await self._turn_messages(finished.session_id, finished.turn_id)
        if messages:
            span = [SpanMessage(m.role.value, m.content) for m in messages]
            ids = tuple(m.message_id for m in messages)
        else:  # not found (a segment busier than the look-back): the texts, no ids
            span = [
                SpanMessage("user", finished.user_text),
                SpanMessage("assistant", finished.reply_text),
            ]
            ids = ()
        source = MemorySource(finished.key, finished.session_id, ids[:MAX_SOURCE_IDS])
        ref = KeyRef(finished.owner, finished.key)
        changes = await self.extract(
            ref, agent, span, source, trigger="turn", turn_id=finished.turn_id
        )
        if changes is not None:  # read: a compaction need not read these again
            self._mark_read(finished.session_id, [m.seq for m in messages])

    async def _turn_messages(self, session_id: str, turn_id: str) -> list[Message]:
        segment = await self.store.get_segment(session_id)
        if segment is None:
            return []
        after = max(segment.message_count - TURN_LOOKBACK, 0)
        page = await self.store.list_messages(session_id, after_seq=after, limit=TURN_LOOKBACK)
        return [
            m
            for m in page
            if m.role in (Role.USER, Role.ASSISTANT)
            and m.content
            and (m.metadata or {}).get("turn_id") == turn_id
        ]

    def _mark_read(self, session_id: str, seqs: Sequence[int]) -> None:
        self._read.setdefault(session_id, set()).update(seqs)
        self._read.move_to_end(session_id)
        while len(self._read) > MAX_READ_MARKS:
            self._read.popitem(last=False)

    # -- before a compaction ----------------------------------------------------------

    def before_compaction(
        self, session_id: str, agent: AgentProfile, span: Sequence[Message]
    ) -> None:
        """Called by the compactor with the span it is about to summarise: read (in the
        background, never delaying the compaction) what no after-turn extraction read."""
        if self.wants(agent.name) is None:
            return
        read = self._read.get(session_id, set())
        unread = [
            m
            for m in span
            if m.seq not in read and m.role in (Role.USER, Role.ASSISTANT) and m.content
        ]
        if not unread:
            return
        task = asyncio.get_running_loop().create_task(self._read_span(session_id, agent, unread))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _read_span(self, session_id: str, agent: AgentProfile, span: list[Message]) -> None:
        try:
            segment = await self.store.get_segment(session_id)
            if segment is None:
                return
            parts = split_span([SpanMessage(m.role.value, m.content) for m in span])
            start = 0
            for part in parts:  # in order: part i is the next len(part) messages
                messages = span[start : start + len(part)]
                start += len(part)
                source = MemorySource(
                    segment.key.name,
                    session_id,
                    tuple(m.message_id for m in messages)[:MAX_SOURCE_IDS],
                )
                changes = await self.extract(segment.key, agent, part, source, trigger="compaction")
                if changes is not None:
                    self._mark_read(session_id, [m.seq for m in messages])
        except Exception:  # never let a background read fail loudly
            log.exception("memory extraction before a compaction of %s failed", session_id)

    # -- one extraction ---------------------------------------------------------------

    async def extract(
        self,
        ref: KeyRef,
        agent: AgentProfile,
        span: Sequence[SpanMessage],
        source: MemorySource,
        *,
        trigger: str,
        turn_id: str | None = None,
    ) -> list[dict[str, Any]] | None:
        """Read `span`, apply what the model says; the changes made, or None when no model
        answered or the answer was malformed (nothing changed; the span stays unread)."""
        lock = self._owner_locks.setdefault(ref.owner, asyncio.Lock())
        async with lock:
            shown = await self._similar(ref.owner, agent.name, ref.name, span)
            items = [ShownItem(i.memory_id, i.text) for i in shown.values()]
            answer = await self._ask(agent, extraction_messages(span, items))
            if answer is None:
                return None
            try:
                ops = parse_memory_answer(answer, shown)
            except MalformedAnswer as exc:
                log.warning(
                    "memory extraction: the answer was malformed, nothing changed: %s (key %s, %s)",
                    exc.reason,
                    ref.storage_id,
                    trigger,
                )
                return None
            removed: set[str] = set()
            for op in ops:
                if op.text is not None and await self.memory.was_forgotten_or_edited(
                    ref.owner, source, op.text
                ):
                    removed.add(op.text)
            overrides = UserOverrides(
                edited_ids=frozenset(
                    i.memory_id
                    for i in shown.values()
                    if i.edited_at is not None and source_matches(i.source, source)
                ),
                removed=removed.__contains__,
            )
            plan = plan_changes(ops, {i.memory_id: i.text for i in shown.values()}, overrides)
            if plan.kept_by_user:
                log.info(
                    "memory extraction: %d changes left out, the user's edits win (key %s)",
                    len(plan.kept_by_user),
                    ref.storage_id,
                )
            changes = [
                done
                for change in plan.changes
                if (done := await self._apply(ref.owner, change, source, shown)) is not None
            ]
        if changes:
            self._announce(ref, changes)
            await self._hook(ref, agent, source, changes, trigger, turn_id)
        return changes

    async def _similar(
        self, owner: str, agent: str, key: str, span: Sequence[SpanMessage]
    ) -> dict[str, MemoryItem]:
        """The items the model is shown, by id: the user's valid items (those that apply to
        this agent and key) most like the span by hybrid search on its text, then the
        newest others up to MAX_SHOWN_ITEMS (a change of fact often shares no word with
        the item it changes: "I moved to Berlin" and "Lives in Lyon.")."""
        query = _CONTROL.sub(" ", " ".join(m.text for m in span)).strip()
        query = query[-MAX_MEMORY_QUERY_CHARS:].strip()  # the newest words say most
        items: list[MemoryItem] = []
        try:
            if query:
                found = await self.memory.searcher.search(
                    owner, query, MAX_SHOWN_ITEMS, agent=agent, key=key
                )
                items = [hit.item for hit in found.hits]
            if len(items) < MAX_SHOWN_ITEMS:
                newest = await self.memory.list_items(owner, limit=MAX_SHOWN_ITEMS * 2)
                items += [i for i in newest if applies_to(i, agent, key)]
        except SessionGateError as exc:
            log.warning("memory extraction: the user's items could not be read (%s)", exc.code)
        shown: dict[str, MemoryItem] = {}
        for item in items:
            if item.valid and len(shown) < MAX_SHOWN_ITEMS:
                shown.setdefault(item.memory_id, item)
        return shown

    async def _ask(self, agent: AgentProfile, messages: list[dict[str, str]]) -> str | None:
        """The first answer of the chain, or None when every model failed."""
        for name in self.model_chain(agent):
            model = self.models.get(name)
            if model is None:
                log.warning("memory extraction: model %s is not configured", name)
                continue
            try:
                async with asyncio.timeout(self.timeout.total_seconds()):
                    return await read_answer(
                        model, messages, answer_options(model), MAX_ANSWER_CHARS
                    )
            except TimeoutError:
                log.warning("memory extraction: model %s timed out", name)
            except ModelError as exc:
                log.warning("memory extraction: model %s failed (%s)", name, exc.code)
        return None

    async def _apply(
        self, owner: str, change: Change, source: MemorySource, shown: Mapping[str, MemoryItem]
    ) -> dict[str, Any] | None:
        """One change through the memory service; None when it was refused (logged)."""
        try:
            if change.op == "add":
                item = await self.memory.add(
                    owner, change.text, source=source, created_by="extraction"
                )
                return {"op": "add", "memory_id": item.memory_id, "text": item.text}
            assert change.memory_id is not None
            if change.op == "update":
                item = await self.memory.update_text(
                    owner, change.memory_id, change.text, created_by="extraction"
                )
                return {
                    "op": "update",
                    "memory_id": item.memory_id,
                    "text": item.text,
                    "supersedes": change.memory_id,
                }
            old = await self.memory.invalidate(owner, change.memory_id)
            return {"op": "delete", "memory_id": old.memory_id, "text": old.text}
        except SessionGateError as exc:  # the limit, or an item changed meanwhile
            log.warning("memory extraction: a %s was refused (%s)", change.op, exc.code)
            return None

    # -- telling -----------------------------------------------------------------------

    def _announce(self, ref: KeyRef, changes: list[dict[str, Any]]) -> None:
        waiting = self._news.setdefault(ref.storage_id, [])
        waiting.append(MemoryEvent(changes))
        del waiting[:-MAX_NEWS_PER_KEY]
        self._news.move_to_end(ref.storage_id)
        while len(self._news) > MAX_NEWS_KEYS:
            self._news.popitem(last=False)

    def news(self, ref: KeyRef) -> list[MemoryEvent]:
        """The `memory` events not announced yet on this key; announced once."""
        return self._news.pop(ref.storage_id, [])

    async def _hook(
        self,
        ref: KeyRef,
        agent: AgentProfile,
        source: MemorySource,
        changes: list[dict[str, Any]],
        trigger: str,
        turn_id: str | None,
    ) -> None:
        if self.hooks is None or not self.hooks.subscribed("memory.changed"):
            return
        data = {
            "owner": ref.owner,
            "key": ref.name,
            "agent": agent.name,
            "trigger": trigger,
            "turn_id": turn_id,
            "session_id": source.session_id,
            "message_ids": list(source.message_ids),
            "changes": [{k: v for k, v in c.items() if k != "text"} for c in changes],
        }
        try:
            await self.hooks.emit(
                "memory.changed",
                data,
                text={"changes": changes},
                owner=ref.owner,
                key=ref.name,
            )
        except Exception:
            log.exception("could not queue a memory.changed hook event")

    async def drain(self) -> None:
        """Wait for the extractions before compactions that are running (tests, stop)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def aclose(self, grace: float = 5.0) -> None:
        """Let the reads before compactions that are running finish for up to `grace`
        seconds (as what runs after a turn is given), then cancel the rest (their messages
        stay in the store as they are, only not read for memory)."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace)
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)


def build_memory_extractor(
    agents: Mapping[str, AgentProfile],
    models: Mapping[str, ReplyModel],
    memory: MemoryService | None,
    store: Store,
    hooks: HookService | None,
) -> MemoryExtractor | None:
    """The extractor, when an agent asks for it; an agent that asks without a model to
    ask, or naming a model that does not exist, stops start-up."""
    wanting = {name: agent for name, agent in agents.items() if agent.memory.extract}
    if not wanting or memory is None:
        return None
    extractor = MemoryExtractor(agents, models, memory, store, hooks=hooks)
    for name, agent in wanting.items():
        chain = extractor.model_chain(agent)
        if not chain:
            raise ConfigError(
                f"agents.{name}.memory: extract needs a control_model or extract_model"
            )
        if chain[0] not in models:
            raise ConfigError(f"agents.{name}.memory: extract_model {chain[0]!r} is not a model")
    return extractor
