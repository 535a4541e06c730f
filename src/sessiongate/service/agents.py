"""Agent profiles: what an agent is once `[agents.defaults]` and its own section merge."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from sessiongate.config import Settings
from sessiongate.config.agents import AgentConfig
from sessiongate.config.handoff import HandoffConfig
from sessiongate.config.hooks import ExtractTasksFor
from sessiongate.config.memory import DEFAULT_MEMORY_POLICY, MemoryPolicy, memory_policy
from sessiongate.config.routing import ActionsPolicy, ClassifierConfig, OutputContract
from sessiongate.core.agent_access import agent_models
from sessiongate.core.context import DEFAULT_MAX_TOOL_RESULT_CHARS, ContextFile
from sessiongate.core.working_set import DEFAULT_POLICY, WorkingSetPolicy
from sessiongate.errors import NotFound
from sessiongate.service.budgets import agent_budget, summary_budget, working_set_policy

DEFAULT_AGENT = "main"
DEFAULTS_SECTION = "defaults"
#: A turn (every model call included) ends after this long unless the agent says otherwise.
DEFAULT_TURN_TIMEOUT = timedelta(minutes=10)
#: One tool call, unless the agent says otherwise.
DEFAULT_TOOL_TIMEOUT = timedelta(seconds=60)


@dataclass(frozen=True, slots=True)
class AgentProfile:
    name: str
    reply_model: str
    fallback_models: tuple[str, ...]
    control_model: str | None
    control_fallback_models: tuple[str, ...]
    memory_window: int
    token_budget: int | None
    system_prompt: str | None
    context_files: tuple[ContextFile, ...]
    turn_timeout: timedelta = DEFAULT_TURN_TIMEOUT
    runner: str = "chat"
    #: Tool names or globs offered to the model (nothing unless listed), and for users
    #: who are not primary, the narrower list they must also match.
    tools: tuple[str, ...] = ()
    tools_non_primary: tuple[str, ...] | None = None
    #: Hosted tool type (Responses API `web_search`) → the tool of this agent run in its
    #: place (`[agents.<name>] hosted_tools`).
    hosted_tools: tuple[tuple[str, str], ...] = ()
    tool_timeout: timedelta = DEFAULT_TOOL_TIMEOUT
    max_parallel_tools: int = 4
    max_tool_steps: int = 8
    max_tool_result_chars: int = DEFAULT_MAX_TOOL_RESULT_CHARS
    planner_model: str | None = None
    max_plan_steps: int = 8
    #: Seed 004: the safety gate before the reply model, the reply's shape, and what
    #: happens to the script of a reply labelled AGENT.
    classifier: ClassifierConfig | None = None
    output_contract: OutputContract = "none"
    actions: ActionsPolicy = "off"
    #: `none`: a stateless agent: nothing is kept; over the OpenAI route the client's
    #: message list is the whole context (service/turn/client_reply.py).
    history: Literal["keep", "none"] = "keep"
    #: The `[voices]` entry its replies are spoken with, unless the turn's mode has one.
    voice: str | None = None
    #: Seed 000's hybrid hand-off after the reply (service/handoff.py), when enabled.
    handoff: HandoffConfig | None = None
    #: Post-reply task extraction (service/task_extraction.py): on or off, for whom, and
    #: the model asked (`extract_tasks_model`, else the control model).
    extract_tasks: bool = False
    extract_tasks_for: ExtractTasksFor = "non_primary"
    extract_tasks_model: str | None = None
    #: `[agents.X] users` (None: unset) and `[agents.X] models` (core/agent_access.py).
    users: tuple[str, ...] | None = None
    models: tuple[str, ...] = ()
    #: The working set (`[agents.X.context]`, core/working_set.py): its policy, and the
    #: token budget of the smallest window among the models its turns may use (None: no
    #: model has a window, as the offline stand-in).
    working_set: WorkingSetPolicy = DEFAULT_POLICY
    context_budget: int | None = None
    #: What one summary request may hold (the summary model's window, when smaller).
    summary_budget: int | None = None
    #: Memory items (`[agents.X.memory]`, config/memory.py): injection and extraction.
    memory: MemoryPolicy = DEFAULT_MEMORY_POLICY

    @property
    def listed_models(self) -> frozenset[str]:
        """The models an override on a key may name for this agent's turns."""
        return agent_models(
            self.reply_model,
            self.fallback_models,
            self.control_model,
            self.control_fallback_models,
            self.models,
        )

    @property
    def uses_tools(self) -> bool:
        """Whether turns of this agent go through the agent runtime (tools or a plan)."""
        return bool(self.tools) or self.runner != "chat"


def merge_agent(name: str, defaults: AgentConfig, own: AgentConfig) -> AgentConfig:
    """Field by field: the agent's own value where set, else the default's."""
    merged = defaults.model_dump()
    merged.update(own.model_dump(exclude_unset=True, exclude_none=True))
    return AgentConfig(**merged)


def build_profiles(settings: Settings, base_dir: Path | None = None) -> dict[str, AgentProfile]:
    """Every configured agent (always at least `main`), with context files read now."""
    defaults = settings.agents.get(DEFAULTS_SECTION, AgentConfig())
    names = [n for n in settings.agents if n != DEFAULTS_SECTION] or [DEFAULT_AGENT]
    profiles = {}
    for name in names:
        cfg = merge_agent(name, defaults, settings.agents.get(name, AgentConfig()))
        files = tuple(_read_context_file(p, base_dir) for p in cfg.context_files or [])
        policy = working_set_policy(defaults.context, settings.agents.get(name, AgentConfig()))
        profiles[name] = AgentProfile(
            name=name,
            reply_model=cfg.model or "offline",
            fallback_models=tuple(cfg.fallback_models or ()),
            control_model=cfg.control_model,
            control_fallback_models=tuple(cfg.control_fallback_models or ()),
            memory_window=cfg.memory_window or 50,
            token_budget=cfg.token_budget,
            system_prompt=cfg.system_prompt,
            context_files=files,
            turn_timeout=cfg.turn_timeout or DEFAULT_TURN_TIMEOUT,
            runner=cfg.runner or "chat",
            tools=tuple(cfg.tools or ()),
            tools_non_primary=(
                None if cfg.tools_non_primary is None else tuple(cfg.tools_non_primary)
            ),
            hosted_tools=tuple(sorted((cfg.hosted_tools or {}).items())),
            tool_timeout=cfg.tool_timeout or DEFAULT_TOOL_TIMEOUT,
            max_parallel_tools=cfg.max_parallel_tools or 4,
            max_tool_steps=cfg.max_tool_steps or 8,
            max_tool_result_chars=cfg.max_tool_result_chars or DEFAULT_MAX_TOOL_RESULT_CHARS,
            planner_model=cfg.planner_model,
            max_plan_steps=cfg.max_plan_steps or 8,
            classifier=cfg.classifier if cfg.classifier and cfg.classifier.enabled else None,
            output_contract=cfg.output_contract or "none",
            actions=cfg.actions or "off",
            history=cfg.history or "keep",
            voice=cfg.voice,
            handoff=cfg.handoff if cfg.handoff and cfg.handoff.enabled else None,
            extract_tasks=bool(cfg.extract_tasks),
            extract_tasks_for=cfg.extract_tasks_for or "non_primary",
            extract_tasks_model=cfg.extract_tasks_model or cfg.control_model,
            users=None if cfg.users is None else tuple(cfg.users),
            models=tuple(cfg.models or ()),
            working_set=policy,
            context_budget=(budget := agent_budget(settings.models, cfg, policy)),
            summary_budget=summary_budget(settings.models, cfg, policy, budget),
            memory=memory_policy(defaults.memory, settings.agents.get(name, AgentConfig()).memory),
        )
    return profiles


def _read_context_file(path: str, base_dir: Path | None) -> ContextFile:
    file = Path(path)
    if not file.is_absolute() and base_dir is not None:
        file = base_dir / file
    try:
        return ContextFile(name=file.name, content=file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"context file {file} cannot be read: {exc}") from None


def pick_agent(profiles: dict[str, AgentProfile], name: str | None) -> AgentProfile:
    chosen = name or (DEFAULT_AGENT if DEFAULT_AGENT in profiles else next(iter(profiles)))
    try:
        return profiles[chosen]
    except KeyError:
        raise NotFound(f"no agent named {chosen!r}", code="agent_not_found") from None
