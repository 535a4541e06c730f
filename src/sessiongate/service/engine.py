"""Wiring: build the store, models, judges and services from validated settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sessiongate.actions.sandbox import ScriptRunner
from sessiongate.agents.builtin.memory import memory_tool_source
from sessiongate.agents.builtin.notes import notes_tool_source
from sessiongate.agents.builtin.source import builtin_tool_source
from sessiongate.agents.builtin.tasks import tasks_tool_source
from sessiongate.agents.delegate import AgentToolSource
from sessiongate.agents.registry import ToolRegistry
from sessiongate.agents.runtime import AgentRunner, check_agents
from sessiongate.config import Settings
from sessiongate.config.models import ModelConfig
from sessiongate.core.clock import Clock, SystemClock
from sessiongate.core.control import BUILTIN_JUDGE, LexicalTopicJudge, TopicJudge
from sessiongate.core.ids import IdGenerator
from sessiongate.core.session_caps import SessionCaps
from sessiongate.errors import ConfigError
from sessiongate.models.base import ReplyModel
from sessiongate.models.judge import ModelTopicJudge
from sessiongate.models.offline import OfflineModel
from sessiongate.service.agent_access import AgentAccess, endpoint_agents
from sessiongate.service.agents import DEFAULT_TURN_TIMEOUT, AgentProfile, build_profiles
from sessiongate.service.artifacts import ArtifactService, build_artifact_service
from sessiongate.service.conversation.locate import ConversationService, build_conversation_service
from sessiongate.service.handoff import HandoffService, user_message_from
from sessiongate.service.hooks import HookService, build_hook_service
from sessiongate.service.idempotency import IdempotencyService, build_idempotency_service
from sessiongate.service.memory import MemoryService, build_memory_service
from sessiongate.service.memory_extraction import MemoryExtractor, build_memory_extractor
from sessiongate.service.modes import ModeService, build_mode_service
from sessiongate.service.notes import NoteService, build_note_service
from sessiongate.service.overrides import OverrideTargets
from sessiongate.service.quotas import build_quota_service
from sessiongate.service.recall import RecallSearch, build_recall_index
from sessiongate.service.retention import RetentionService, build_retention_service
from sessiongate.service.routing import RouteService
from sessiongate.service.sessions import SessionService
from sessiongate.service.speech import SpeechService
from sessiongate.service.storage import build_store, open_store
from sessiongate.service.task_extraction import build_task_extractor
from sessiongate.service.tasks import TaskService, build_task_service
from sessiongate.service.turn.journal import TurnJournal
from sessiongate.service.turn.pipeline import TurnService
from sessiongate.service.turn.recovery import StoredTurns, build_turn_records
from sessiongate.service.turn.scripted_reply import ScriptedReplies
from sessiongate.service.users import UserService
from sessiongate.store.base import Store


@dataclass(slots=True)
class Engine:
    store: Store
    sessions: SessionService
    turns: TurnService
    users: UserService
    settings: Settings
    #: Every tool source (built-ins, MCP servers, agents as tools).
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    #: Files tools made, served at GET /v1/artifacts/{id} (None: an engine without them).
    artifacts: ArtifactService | None = None
    #: The users' notes (GET/POST /v1/notes, notes_search, notes_add).
    notes: NoteService | None = None
    #: What the assistant knows about each user (/v1/memory, memory_*, injection; §13).
    memory: MemoryService | None = None
    #: The users' tasks (/v1/tasks, tasks_add, tasks_list, tasks_complete).
    tasks: TaskService | None = None
    #: Modes enabled per user and unlocked for a while (/v1/me, /v1/modes, routing).
    modes: ModeService | None = None
    #: Where requests that name no key go (DESIGN.md §8).
    routes: RouteService | None = None
    #: OpenAI-compatible conversations: identity, reconciliation, one-shot replies (§11).
    conversations: ConversationService | None = None
    #: Archives or erases idle keys (`[retention]`); the app's lifespan starts its schedule.
    retention: RetentionService | None = None
    #: The voices (`[voices]`): `speak: true` turns and POST /v1/audio/speech; None: none.
    speech: SpeechService | None = None
    #: Signed webhooks (`[[hooks]]`); its sender is started by the app's lifespan.
    hooks: HookService | None = None
    #: Exactly-once turns: requests with an `Idempotency-Key` (service/idempotency.py).
    idempotency: IdempotencyService | None = None
    #: This process's recent turns, readable again after a dropped connection
    #: (GET /v1/turns/{id}/events, a socket's `resume`; service/turn/journal.py).
    turn_journal: TurnJournal | None = None
    #: Keeps memory items up to date after turns and before compactions (§13).
    memory_extractor: MemoryExtractor | None = None

    async def start(self) -> None:
        """Open what needs the running event loop: PostgreSQL's pools (and its migrations).
        SQLite opens at build time, so it has no `start`. Idempotent."""
        await open_store(self.store)
        await self.tools.start()
        if self.notes is not None:
            await self.notes.start()  # loads a local embeddings model, if configured

    async def stop(self) -> None:
        """Close what `start` opened, so another event loop can `start` again (the CLI
        bootstraps on one loop and serves on the next). SQLite: nothing to do."""
        if self.retention is not None:
            await self.retention.stop_schedule()
        if self.hooks is not None:
            await self.hooks.stop()  # before the store's pools close
        if self.artifacts is not None and self.artifacts.copies is not None:
            await self.artifacts.copies.stop()  # the WebDAV copies' sender, likewise
        # Tool sources (MCP sessions) live on this loop too; they reconnect at first use.
        await self.tools.aclose()
        await self.sessions.recall_search.aclose()  # background embedding, on this loop
        stopper = getattr(self.store, "stop", None)
        if stopper is not None:
            await stopper()

    async def aclose(self) -> None:
        if self.retention is not None:
            await self.retention.stop_schedule()
        await self.turns.aclose()
        await self.sessions.recall_search.aclose()
        if self.memory_extractor is not None:
            await self.memory_extractor.aclose()
        if self.idempotency is not None:
            await self.idempotency.aclose()  # the outcomes of the turns just ended
        if self.conversations is not None:
            await self.conversations.stateless.aclose()
        if self.hooks is not None:
            await self.hooks.stop()
        if self.artifacts is not None and self.artifacts.copies is not None:
            await self.artifacts.copies.stop()
        await self.tools.aclose()
        await self.close_models()
        await self.store.close()

    async def close_models(self) -> None:
        """Release the HTTP clients of the model adapters that hold one."""
        for model in self.turns.models.values():
            closer = getattr(model, "aclose", None)
            if closer is not None:
                await closer()
        if self.notes is not None:
            await self.notes.aclose()  # the embeddings client, if any
        if self.speech is not None:
            await self.speech.aclose()  # speech servers' clients, loaded voices


def build_reply_model(name: str, config: ModelConfig) -> ReplyModel:
    # Imported here so a gateway without these providers configured never loads the SDKs.
    if config.provider == "offline":
        return OfflineModel(name)
    if config.provider == "command":
        from sessiongate.models.command import CommandModel

        return CommandModel.from_config(name, config)
    if config.provider == "openai":
        from sessiongate.models.openai.adapter import OpenAIChatModel

        return OpenAIChatModel.from_config(name, config)
    if config.provider == "anthropic":
        from sessiongate.models.anthropic.adapter import AnthropicModel

        return AnthropicModel.from_config(name, config)
    raise ConfigError(f"models.{name}.provider: unknown provider {config.provider!r}")


def build_engine(
    settings: Settings,
    *,
    clock: Clock | None = None,
    models: dict[str, ReplyModel] | None = None,
    config_dir: Path | None = None,
) -> Engine:
    """`models` adds or replaces reply models by name (tests use scripted ones)."""
    clock = clock or SystemClock()
    registry: dict[str, ReplyModel] = {"offline": OfflineModel("offline")}
    for name, model_config in settings.models.items():
        registry[name] = build_reply_model(name, model_config)
    registry.update(models or {})
    judges: dict[str, TopicJudge] = {BUILTIN_JUDGE: LexicalTopicJudge()}
    for name, model in registry.items():
        judges[name] = ModelTopicJudge(model)
    try:
        agents = build_profiles(settings, config_dir)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for binding in ("claude_agent", "codex_agent", "lifehub_agent", "desktop_agent"):
        bound = getattr(settings.compat, binding)
        if bound not in agents:
            raise ConfigError(
                f"compat.{binding}: no agent named {bound!r} (have: {sorted(agents)})"
            )
    store, user_store, locks = build_store(settings)
    sessions = SessionService(
        store,
        clock,
        IdGenerator(clock),
        settings.lifecycle.policy(),
        locks,
        max_content_chars=settings.limits.max_content_chars,
        override_targets=OverrideTargets(registry, judges),
        caps=SessionCaps(settings.limits.max_keys_per_user, settings.limits.max_segments_per_key),
    )
    check_agents(agents, registry)
    tools = ToolRegistry()
    if settings.mcp:
        # Imported here so a gateway without MCP servers never loads the SDK.
        from sessiongate.agents.mcp.source import McpToolSource

        for server, server_config in settings.mcp.items():
            tools.add_source(McpToolSource(server, server_config))
    delegates = AgentToolSource(list(agents))
    tools.add_source(delegates)
    artifacts = build_artifact_service(settings, store, clock, sessions.ids)
    sessions.on_erase(artifacts.delete_key)
    tools.add_source(builtin_tool_source(settings, artifacts))
    notes = build_note_service(settings, store, clock, sessions.ids)
    tools.add_source(notes_tool_source(notes))
    memory = build_memory_service(settings, store, clock, sessions.ids, notes.embedder)
    tools.add_source(memory_tool_source(memory))
    # Explicit recall ranks with the notes' embedder too (DESIGN.md §13, recall across keys).
    recall = RecallSearch(build_recall_index(store), notes.embedder)
    sessions.recall_search = recall
    sessions.on_rotation(recall.rotated)
    # A user's tasks outlive the key they came from, so no on_erase hook here.
    tasks = build_task_service(
        store, clock, sessions.ids, max_tasks=settings.tasks.max_tasks_per_user
    )
    tools.add_source(tasks_tool_source(tasks))
    turns = TurnService(
        sessions,
        agents,
        registry,
        judges,
        max_reply_chars=settings.limits.max_reply_chars,
        runtime=AgentRunner(registry, tools, settings.limits),
        artifacts=artifacts,
        scripted=ScriptedReplies(registry, build_script_runner(settings, agents)),
    )
    delegates.bind(turns.start_turn)
    turns.memory = memory  # the items a turn is given (service/turn/memory_context.py)
    turns.journal = TurnJournal(
        retention=settings.limits.turn_replay_retention,
        max_finished=settings.limits.turn_replay_turns,
        # Turns of another process, or from before a restart: read back from the store.
        stored=StoredTurns(
            build_turn_records(store),
            {name: agent.turn_timeout for name, agent in agents.items()},
            DEFAULT_TURN_TIMEOUT,
        ),
    )
    conversations = build_conversation_service(settings, sessions, registry)
    turns.conversations = conversations
    speech = build_speech_service(settings, agents, artifacts)
    turns.speaker = speech
    hooks = build_hook_service(settings, store)
    if hooks is not None:
        hooks.attach(sessions, turns)  # turn.completed is queued before extraction runs
    extractor = build_task_extractor(
        agents, registry, tasks, clock, settings.lifecycle.policy().timezone, hooks
    )
    if extractor is not None:
        turns.after_turn(extractor)
    remembering = build_memory_extractor(agents, registry, memory, store, hooks)
    if remembering is not None:  # after the hooks: turn.completed is queued first
        turns.after_turn(remembering)
        turns.compactor.before_summary = remembering.before_compaction
        turns.memory_news = remembering.news
    if any(agent.handoff is not None for agent in agents.values()):
        turns.handoffs = HandoffService(agents, registry, tools, user_message_from(sessions))
    users = UserService(user_store, clock)
    modes = build_mode_service(settings.modes, store, clock, sessions.ids)
    routes = RouteService(settings.routes, settings.modes, agents, modes)
    turns.access = AgentAccess(agents, routes, endpoint_agents(settings.compat), modes)
    turns.quotas = build_quota_service(store, user_store, clock, settings.quotas.defaults())
    return Engine(
        store,
        sessions,
        turns,
        users,
        settings,
        tools,
        artifacts=artifacts,
        notes=notes,
        memory=memory,
        tasks=tasks,
        modes=modes,
        routes=routes,
        conversations=conversations,
        retention=build_retention_service(settings, store, sessions),
        speech=speech,
        hooks=hooks,
        idempotency=build_idempotency_service(store, clock, settings.limits.idempotency_retention),
        turn_journal=turns.journal,
        memory_extractor=remembering,
    )


def build_speech_service(
    settings: Settings, agents: Mapping[str, AgentProfile], artifacts: ArtifactService
) -> SpeechService | None:
    """The voices, when any are configured (engines built, nothing loaded yet)."""
    if not settings.voices:
        return None
    from sessiongate.speech.engines import build_speech_engines

    engines = build_speech_engines(settings.voices, settings.models)
    return SpeechService(engines, settings.voices, settings.modes, agents, artifacts)


def build_script_runner(
    settings: Settings, agents: Mapping[str, AgentProfile]
) -> ScriptRunner | None:
    """The sandbox, when an agent runs scripts on this host; a gateway that cannot have
    one refuses to start rather than run a script unconfined."""
    wanting = sorted(name for name, agent in agents.items() if agent.actions == "sandbox")
    for name, agent in agents.items():
        if agent.output_contract == "script_delimiter" and agent.uses_tools:
            raise ConfigError(
                f'agents.{name}: output_contract = "script_delimiter" replies in one piece'
                " and cannot be combined with tools or a plan runner"
            )
        if agent.actions != "off" and agent.output_contract != "script_delimiter":
            raise ConfigError(
                f"agents.{name}: actions = {agent.actions!r} needs"
                ' output_contract = "script_delimiter" (the reply must carry the script)'
            )
    if not wanting:
        return None
    from sessiongate.actions.sandbox import SandboxUnavailable, build_sandbox

    try:
        return build_sandbox(settings.actions, settings.data_dir / "sandbox")
    except SandboxUnavailable as exc:
        raise ConfigError(
            f'agents {", ".join(wanting)}: actions = "sandbox" but {exc.message}'
        ) from None
