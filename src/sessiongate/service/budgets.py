"""Each agent's working-set policy and token budget, resolved from its configuration and
its models' (`[agents.X.context]`, `[models.X] context_window`; the rules are
core/budgets.py), and the per-model correction of the token estimate, learnt from the
prompt tokens providers report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sessiongate.config.agents import AgentConfig
from sessiongate.config.models import ModelConfig
from sessiongate.config.working_set import WorkingSetConfig
from sessiongate.core.budgets import corrected_ratio, resolve_budget
from sessiongate.core.events import EndEvent, ToolStartEvent, TurnEvent
from sessiongate.core.working_set import DEFAULT_COMPACT_AT, DEFAULT_KEEP_RECENT, WorkingSetPolicy

#: Providers whose models have no window of their own (the offline stand-in, a command).
WINDOWLESS_PROVIDERS = frozenset({"offline", "command"})


def working_set_policy(defaults: WorkingSetConfig | None, own: AgentConfig) -> WorkingSetPolicy:
    """`[agents.defaults.context]` field by field under `[agents.X.context]`."""
    merged: dict[str, object] = {}
    for section in (defaults, own.context):
        if section is not None:
            merged.update(section.model_dump(exclude_none=True))
    config = WorkingSetConfig.model_validate(merged)
    return WorkingSetPolicy(
        compaction=config.compaction or "auto",
        reserve_tokens=config.reserve_tokens,
        compact_at=config.compact_at or DEFAULT_COMPACT_AT,
        keep_recent=config.keep_recent or DEFAULT_KEEP_RECENT,
        summary_model=config.summary_model,
        carry_over=config.carry_over or "off",
    )


def model_budget(
    name: str, models: Mapping[str, ModelConfig], reserve_tokens: int | None
) -> int | None:
    """The budget of one model, or None for one without a window (the offline stand-in
    and command models, unless `context_window` is configured)."""
    config = models.get(name)
    if config is None:
        config = ModelConfig()  # `offline` needs no section
    if config.context_window is None and config.provider in WINDOWLESS_PROVIDERS:
        return None
    budget = resolve_budget(
        configured_window=config.context_window,
        upstream_name=config.model or name,
        reserve_tokens=reserve_tokens,
    )
    return budget.tokens


def agent_budget(
    models: Mapping[str, ModelConfig], agent: AgentConfig, policy: WorkingSetPolicy
) -> int | None:
    """The smallest budget among the models an agent's turn may be answered by (its
    model, fallbacks and the models an override may name), so a fallback or an override
    never receives more than its window. None when none has a window."""
    names = [agent.model or "offline", *(agent.fallback_models or ()), *(agent.models or ())]
    budgets = [b for n in names if (b := model_budget(n, models, policy.reserve_tokens))]
    return min(budgets) if budgets else None


def summary_budget(
    models: Mapping[str, ModelConfig],
    agent: AgentConfig,
    policy: WorkingSetPolicy,
    context_budget: int | None,
) -> int | None:
    """What one summary request may hold: the agent's budget, or the summary model's
    (`summary_model`, else the control model, else the reply model) when smaller."""
    name = policy.summary_model or agent.control_model or agent.model or "offline"
    own = model_budget(name, models, policy.reserve_tokens)
    if own is None or context_budget is None:
        return context_budget if own is None else own
    return min(own, context_budget)


class TokenCalibration:
    """Per model, the ratio of the provider's reported prompt tokens to the estimate
    (1.0 until a provider reports; bounded 0.5 to 2). In memory, per process."""

    def __init__(self) -> None:
        self._ratios: dict[str, float] = {}

    def ratio(self, model: str) -> float:
        return self._ratios.get(model, 1.0)

    def observe(self, model: str, *, estimated: int, reported: int) -> float:
        ratio = corrected_ratio(self.ratio(model), estimated=estimated, reported=reported)
        self._ratios[model] = ratio
        return ratio


def observe_prompt_tokens(
    calibration: TokenCalibration, model: str | None, events: Sequence[TurnEvent], estimate: int
) -> None:
    """After a turn of one model call (no tool step: a later call's prompt holds more
    than the context), compare the prompt tokens its provider reported to the estimate."""
    if model is None or any(isinstance(e, ToolStartEvent) for e in events):
        return
    for event in reversed(events):
        if isinstance(event, EndEvent):
            reported = event.usage.get("prompt_tokens", 0)
            # An estimate the gateway made itself (a provider that reported nothing) says
            # nothing about the model's tokenizer: learning from it would only echo it.
            if reported and not event.usage.get("estimated"):
                calibration.observe(model, estimated=estimate, reported=reported)
            return
