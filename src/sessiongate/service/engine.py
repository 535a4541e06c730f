"""Wiring: build the store, models, judges and services from validated settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sessiongate.config import ConfigError, ModelConfig, Settings
from sessiongate.core.clock import Clock, SystemClock
from sessiongate.core.control import BUILTIN_JUDGE, LexicalTopicJudge, TopicJudge
from sessiongate.core.ids import IdGenerator
from sessiongate.models.base import ReplyModel
from sessiongate.models.judge import ModelTopicJudge
from sessiongate.models.offline import OfflineModel
from sessiongate.service.agents import build_profiles
from sessiongate.service.locks import KeyLocks
from sessiongate.service.sessions import SessionService
from sessiongate.service.turns import TurnService
from sessiongate.service.users import UserService
from sessiongate.store.sqlite import SQLiteStore
from sessiongate.store.sqlite_users import SQLiteUserStore


@dataclass(slots=True)
class Engine:
    store: SQLiteStore
    sessions: SessionService
    turns: TurnService
    users: UserService
    settings: Settings

    async def aclose(self) -> None:
        await self.turns.aclose()
        await self.close_models()
        await self.store.close()

    async def close_models(self) -> None:
        """Release the HTTP clients of the model adapters that hold one."""
        for model in self.turns.models.values():
            closer = getattr(model, "aclose", None)
            if closer is not None:
                await closer()


def build_reply_model(name: str, config: ModelConfig) -> ReplyModel:
    # Imported here so a gateway without these providers configured never loads the SDKs.
    if config.provider == "offline":
        return OfflineModel(name)
    if config.provider == "command":
        from sessiongate.models.command import CommandModel

        return CommandModel.from_config(name, config)
    if config.provider == "openai":
        from sessiongate.models.openai import OpenAIChatModel

        return OpenAIChatModel.from_config(name, config)
    if config.provider == "anthropic":
        from sessiongate.models.anthropic import AnthropicModel

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
    for field in ("claude_agent", "codex_agent"):
        bound = getattr(settings.compat, field)
        if bound not in agents:
            raise ConfigError(f"compat.{field}: no agent named {bound!r} (have: {sorted(agents)})")
    store = SQLiteStore.open(settings.sqlite_path, synchronous=settings.database.synchronous)
    sessions = SessionService(
        store,
        clock,
        IdGenerator(clock),
        settings.lifecycle.policy(),
        KeyLocks(),
        max_content_chars=settings.limits.max_content_chars,
    )
    turns = TurnService(sessions, agents, registry, judges)
    users = UserService(SQLiteUserStore(store), clock)
    return Engine(store, sessions, turns, users, settings)
