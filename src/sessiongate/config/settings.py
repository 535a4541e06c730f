"""Configuration: one TOML file plus `SESSIONGATE_<SECTION>__<FIELD>` environment overrides,
validated at start-up with one clear message per bad field.

`Settings` gathers the sections; each section is defined in a `config_<topic>.py` module
beside this one, and the checks that span sections are here (`cross_check`)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sessiongate.config.agents import AgentConfig
from sessiongate.config.artifacts import ArtifactsConfig
from sessiongate.config.compat import CompatConfig
from sessiongate.config.database import DatabaseConfig
from sessiongate.config.handoff import check_handoff
from sessiongate.config.hooks import HookConfig, check_hooks
from sessiongate.config.lifecycle import LifecycleConfig
from sessiongate.config.limits import LimitsConfig
from sessiongate.config.models import ModelConfig
from sessiongate.config.openai import OpenAIConfig
from sessiongate.config.quotas import QuotasConfig
from sessiongate.config.retention import RetentionConfig
from sessiongate.config.routing import ModeConfig, RouteConfig, SandboxConfig, check_routing
from sessiongate.config.server import ServerConfig
from sessiongate.config.tools import (
    McpServerConfig,
    NotesConfig,
    TasksConfig,
    ToolsConfig,
    check_mcp_servers,
)
from sessiongate.config.voice import VoiceConfig, check_voices
from sessiongate.errors import ConfigError

CONFIG_ENV = "SESSIONGATE_CONFIG"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="SESSIONGATE_", env_nested_delimiter="__", extra="forbid"
    )

    data_dir: Path = Path("./data")
    server: ServerConfig = ServerConfig()
    database: DatabaseConfig = DatabaseConfig()
    lifecycle: LifecycleConfig = LifecycleConfig()
    models: dict[str, ModelConfig] = {}
    agents: dict[str, AgentConfig] = {}
    limits: LimitsConfig = LimitsConfig()
    compat: CompatConfig = CompatConfig()
    mcp: dict[str, McpServerConfig] = {}
    notes: NotesConfig = NotesConfig()
    tasks: TasksConfig = TasksConfig()
    tools: ToolsConfig = ToolsConfig()
    #: First match wins; none configured: seed 000's table (DESIGN.md §8).
    routes: list[RouteConfig] = []
    modes: dict[str, ModeConfig] = {}
    #: Limits of the sandbox that runs scripts of agents with `actions = "sandbox"`.
    actions: SandboxConfig = SandboxConfig()
    #: The OpenAI-compatible route: conversation identity, rotation notice, one-shot
    #: requests (config/openai.py, DESIGN.md §11).
    openai: OpenAIConfig = OpenAIConfig()
    #: Archive or erase keys idle longer than `idle_after` (config/retention.py).
    retention: RetentionConfig = RetentionConfig()
    #: Voices replies and `POST /v1/audio/speech` speak with (config/voice.py).
    voices: dict[str, VoiceConfig] = {}
    #: Signed webhooks for turn, rotation and task events (DESIGN.md §9, docs/hooks.md).
    hooks: list[HookConfig] = []
    #: The optional WebDAV copy of every artifact (config/artifacts.py, docs/artifacts.md).
    artifacts: ArtifactsConfig = ArtifactsConfig()
    #: Default per-user quotas, enforced across gateways (config/quotas.py, DESIGN.md §15).
    quotas: QuotasConfig = QuotasConfig()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment overrides the file; the file (passed as init values) overrides
        # the defaults.
        return (env_settings, init_settings)

    @property
    def turn_body_bytes(self) -> int:
        """The body limit of turn routes: the ordinary one plus room for the attachments
        a turn may carry, base64-encoded (4 bytes per 3)."""
        limits = self.limits
        per_image = -(-limits.max_attachment_bytes * 4 // 3) + 1024
        return limits.max_body_bytes + limits.max_attachments * per_image

    @property
    def sqlite_path(self) -> Path:
        url = self.database.url
        if not url:
            return self.data_dir / "sessiongate.db"
        prefix = "sqlite:///"
        if not url.startswith(prefix):
            raise ValueError(f"database.url {url!r} is not a sqlite:/// URL")
        return Path(url[len(prefix) :])


def load_settings(path: str | Path | None = None) -> Settings:
    """Read the TOML file (if any), apply environment overrides, validate everything."""
    chosen = path or os.environ.get(CONFIG_ENV)
    data: dict[str, Any] = {}
    if chosen:
        file = Path(chosen)
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {file} does not exist") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {file} is not valid TOML: {exc}") from None
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None
    problems = cross_check(settings)
    if problems:
        raise ConfigError("\n".join(problems))
    return settings


def format_validation_error(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "(top level)"
        lines.append(f"{where}: {error['msg']}")
    return "\n".join(lines)


def cross_check(settings: Settings) -> list[str]:
    """Checks that span sections: every model an agent names must be defined, and
    several workers need a database they can share."""
    problems = []
    if settings.server.workers > 1 and not settings.database.url.startswith("postgres"):
        problems.append(
            f"server.workers = {settings.server.workers} needs database.url ="
            ' "postgresql://…": several processes share sessions only through PostgreSQL'
            " (SQLite serves one process)"
        )
    known = set(settings.models) | {"offline"}
    for agent_name, agent in settings.agents.items():
        names = [agent.model, agent.control_model, *(agent.fallback_models or [])]
        names += agent.control_fallback_models or []
        names.append(agent.planner_model)
        names.append(agent.extract_tasks_model)
        names += agent.models or []
        for name in names:
            if name is not None and name not in known:
                problems.append(f"agents.{agent_name}: model {name!r} is not defined in [models]")
    for provider, name in settings.compat.providers.items():
        if name not in known:
            problems.append(
                f"compat.providers.{provider}: model {name!r} is not defined in [models]"
            )
    embeddings = settings.notes.embeddings
    if embeddings is not None and embeddings != "builtin":
        if embeddings not in settings.models:
            problems.append(
                f"notes.embeddings: model {embeddings!r} is not defined in [models]"
                ' (or use "builtin")'
            )
        elif settings.models[embeddings].provider != "openai":
            problems.append(
                f"notes.embeddings: model {embeddings!r} has provider"
                f" {settings.models[embeddings].provider!r}; embeddings need an"
                ' OpenAI-compatible /v1/embeddings (provider "openai")'
            )
    agent_names = {n for n in settings.agents if n != "defaults"} or {"main"}
    for binding in ("claude_agent", "codex_agent", "lifehub_agent", "desktop_agent"):
        bound = getattr(settings.compat, binding)
        if bound not in agent_names:
            problems.append(
                f"compat.{binding}: no agent named {bound!r} (have: {sorted(agent_names)});"
                " every seed endpoint is served, so each names a configured agent"
            )
    problems += check_routing(
        settings.routes,
        settings.modes,
        agent_names,
        known,
        {name: agent.classifier for name, agent in settings.agents.items()},
    )
    problems += check_hooks(settings.hooks)
    for name, agent in settings.agents.items():
        problems += check_handoff(name, agent.handoff, known)
    problems += check_voices(settings.voices, settings.modes, settings.agents, settings.models)
    problems += check_mcp_servers(settings.mcp)
    return problems
