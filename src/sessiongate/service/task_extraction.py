"""Post-reply task extraction (`[agents.<name>] extract_tasks = true`, DESIGN.md §9,
seed 000): after a complete turn, the agent's control model reads the exchange and the
tasks it names go into the user's tasks, with the turn as their source; then a
`tasks.extracted` hook event.

It runs as an after-turn listener (service/turn/after.py): in the background, once the
reply is kept, so it never delays or changes a reply. Every failure (a model that fails
or times out, an answer that is not the promised JSON: core/task_extraction.py) adds
nothing and is logged without the exchange's text. By default only turns of users who
are not primary are read (`extract_tasks_for = "non_primary"`, seed 000's rule: the
primary user keeps their own list); `"all"` reads every turn.

A task whose title (ignoring case) is already one of the user's open tasks is not added
again; extractions of one user run one at a time in this process, so two turns naming
the same task add it once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from datetime import date, timedelta
from zoneinfo import ZoneInfo

from sessiongate.core.clock import Clock
from sessiongate.core.task_extraction import (
    MAX_ANSWER_CHARS,
    ExtractedTask,
    ExtractionRefused,
    extraction_messages,
    parse_extraction,
)
from sessiongate.core.tasks import MAX_PAGE
from sessiongate.errors import ConfigError, ModelError, SessionGateError
from sessiongate.models.answers import answer_options, read_answer
from sessiongate.models.base import ReplyModel
from sessiongate.service.agents import AgentProfile
from sessiongate.service.hooks import COMPLETED, HookService
from sessiongate.service.tasks import TaskService
from sessiongate.service.turn.handle import FinishedTurn
from sessiongate.store.tasks import Task

log = logging.getLogger(__name__)

#: The longest one model may take to answer before the next in the chain is asked.
EXTRACTION_TIMEOUT = timedelta(seconds=60)


class TaskExtractor:
    def __init__(
        self,
        agents: Mapping[str, AgentProfile],
        models: Mapping[str, ReplyModel],
        tasks: TaskService,
        clock: Clock,
        timezone: ZoneInfo,
        *,
        hooks: HookService | None = None,
        timeout: timedelta | None = None,
    ) -> None:
        self.agents = agents
        self.models = models
        self.tasks = tasks
        self.clock = clock
        self.timezone = timezone
        self.hooks = hooks
        self.timeout = timeout or EXTRACTION_TIMEOUT
        #: One lock per user whose turns were read (users are few; they are kept).
        self._owner_locks: dict[str, asyncio.Lock] = {}

    def wants(self, finished: FinishedTurn) -> AgentProfile | None:
        """The agent, when this turn is one its extraction reads."""
        agent = self.agents.get(finished.agent)
        if agent is None or not agent.extract_tasks or agent.extract_tasks_model is None:
            return None
        if finished.status not in COMPLETED or not finished.reply_text or finished.offline:
            return None
        if agent.extract_tasks_for == "non_primary" and finished.primary:
            return None
        return agent

    async def __call__(self, finished: FinishedTurn) -> None:
        """The after-turn listener."""
        agent = self.wants(finished)
        if agent is None:
            return
        extracted = await self.extract(agent, finished)
        if not extracted:
            return
        added = await self.add(finished, extracted)
        if added and self.hooks is not None:
            await self.hooks.emit(
                "tasks.extracted",
                {
                    "owner": finished.owner,
                    "key": finished.key,
                    "agent": finished.agent,
                    "turn_id": finished.turn_id,
                    "session_id": finished.session_id,
                    "tasks": [{"id": t.task_id, "due": _day(t.due)} for t in added],
                },
                text={
                    "tasks": [
                        {"id": t.task_id, "title": t.title, "due": _day(t.due)} for t in added
                    ]
                },
                owner=finished.owner,
                key=finished.key,
            )

    async def extract(self, agent: AgentProfile, finished: FinishedTurn) -> list[ExtractedTask]:
        """Ask the chain (the extraction model, then the control fallbacks when it is the
        control model) until one answers; its answer parsed strictly. [] on any failure."""
        assert agent.extract_tasks_model is not None
        names = [agent.extract_tasks_model]
        if agent.extract_tasks_model == agent.control_model:
            names += list(agent.control_fallback_models)
        today = self.clock.now().astimezone(self.timezone).date()
        messages = extraction_messages(finished.user_text, finished.reply_text or "", today)
        for name in names:
            try:
                async with asyncio.timeout(self.timeout.total_seconds()):
                    answer = await self._ask(name, messages)
            except TimeoutError:
                log.warning("task extraction: model %s timed out (turn %s)", name, finished.turn_id)
                continue
            except ModelError as exc:
                log.warning(
                    "task extraction: model %s failed (%s) (turn %s)",
                    name,
                    exc.code,
                    finished.turn_id,
                )
                continue
            try:
                return parse_extraction(answer)
            except ExtractionRefused as exc:
                log.warning(
                    "task extraction: model %s's answer refused: %s (turn %s)",
                    name,
                    exc.reason,
                    finished.turn_id,
                )
                return []
        return []

    async def add(self, finished: FinishedTurn, extracted: list[ExtractedTask]) -> list[Task]:
        """Add the tasks the user has no open task of the same title for."""
        owner = finished.owner
        lock = self._owner_locks.setdefault(owner, asyncio.Lock())
        added: list[Task] = []
        async with lock:
            existing = await self._open_titles(owner)
            for task in extracted:
                if task.title.casefold() in existing:
                    continue
                try:
                    made = await self.tasks.add(
                        owner,
                        task.title,
                        due=task.due,
                        source_key=finished.key,
                        source_turn_id=finished.turn_id,
                    )
                except SessionGateError as exc:
                    log.warning("task extraction: a task was refused (%s)", exc.code)
                    continue
                existing.add(task.title.casefold())
                added.append(made)
        return added

    async def _open_titles(self, owner: str) -> set[str]:
        titles: set[str] = set()
        after: str | None = None
        while True:
            page = await self.tasks.list_tasks(owner, "open", limit=MAX_PAGE, after=after)
            titles |= {task.title.casefold() for task in page}
            if len(page) < MAX_PAGE:
                return titles
            after = page[-1].task_id

    async def _ask(self, name: str, messages: list[dict[str, str]]) -> str:
        model = self.models.get(name)
        if model is None:
            raise ModelError(f"model {name!r} is not configured", code="model_missing")
        return await read_answer(model, messages, answer_options(model), MAX_ANSWER_CHARS)


def _day(value: date | None) -> str | None:
    return None if value is None else value.isoformat()


def build_task_extractor(
    agents: Mapping[str, AgentProfile],
    models: Mapping[str, ReplyModel],
    tasks: TaskService,
    clock: Clock,
    timezone: ZoneInfo,
    hooks: HookService | None,
) -> TaskExtractor | None:
    """The extractor, when an agent asks for it; an agent that asks without a model to
    ask, or naming a model that does not exist, stops start-up."""
    wanting = {name: agent for name, agent in agents.items() if agent.extract_tasks}
    if not wanting:
        return None
    for name, agent in wanting.items():
        model = agent.extract_tasks_model
        if model is None:
            raise ConfigError(
                f"agents.{name}: extract_tasks needs a control_model or extract_tasks_model"
            )
        if model not in models:
            raise ConfigError(f"agents.{name}: extract_tasks_model {model!r} is not a model")
    return TaskExtractor(agents, models, tasks, clock, timezone, hooks=hooks)
