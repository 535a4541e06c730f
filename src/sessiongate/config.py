"""Configuration: one TOML file plus `SESSIONGATE_<SECTION>__<FIELD>` environment overrides,
validated at start-up with one clear message per bad field."""

from __future__ import annotations

import os
import tomllib
from datetime import time, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    ValidationError,
    field_serializer,
    field_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from sessiongate.config_artifacts import ArtifactsConfig
from sessiongate.config_base import Duration, OptionalDuration, Section
from sessiongate.config_handoff import HandoffConfig, check_handoff
from sessiongate.config_hooks import ExtractTasksFor, HookConfig, check_hooks
from sessiongate.config_openai import OpenAIConfig
from sessiongate.config_retention import RetentionConfig
from sessiongate.config_routing import (
    ActionsPolicy,
    ClassifierConfig,
    ModeConfig,
    OutputContract,
    RouteConfig,
    SandboxConfig,
    check_routing,
)
from sessiongate.config_tools import (
    SERVER_NAME,
    McpServerConfig,
    NotesConfig,
    Runner,
    TasksConfig,
    ToolsConfig,
    check_tool_patterns,
)
from sessiongate.config_voice import VoiceConfig, check_voices
from sessiongate.core.rotation import LifecycleMode, LifecyclePolicy, SemanticPolicy
from sessiongate.errors import ConfigError

CONFIG_ENV = "SESSIONGATE_CONFIG"


class ServerConfig(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    #: A WebSocket must send its API key as the first frame within this time.
    ws_auth_timeout: Duration = timedelta(seconds=10)
    #: One log line per HTTP request (uvicorn's access log); turns are logged regardless.
    access_log: bool = False
    #: Worker processes on the one listening socket. More than one needs PostgreSQL.
    workers: int = Field(1, ge=1, le=64)
    #: A bearer token that may read /metrics without being an admin's API key (for a
    #: Prometheus scraper). Unset: only admins read /metrics.
    metrics_token: str | None = Field(None, min_length=16, max_length=512)

    @field_serializer("metrics_token", when_used="json")
    def _mask_token(self, value: str | None) -> str | None:
        return None if value is None else "********"


class CompatConfig(Section):
    """The agents and keys behind the source designs' own clients."""

    #: Seed 001's two WebSocket endpoints.
    claude_agent: str = "main"
    codex_agent: str = "main"
    #: Seed 002's `POST /chat`: its agent, its key (`{user}` is the caller's name), and
    #: the models its `provider` field picks (`{openai = "gpt", ollama = "local"}`).
    lifehub_agent: str = "main"
    lifehub_key: str = "lifehub:{user}"
    #: Seed 004's `GET /ai`: its agent and its key (`{user}` is the caller's name).
    desktop_agent: str = "main"
    desktop_key: str = "desktop:{user}"
    #: The user `GET /ai` runs as for a request with no API key from this machine's
    #: loopback address (seed 004's desktop client sends none). Unset: a key is required.
    desktop_user: str | None = None
    providers: dict[str, str] = {}


class DatabaseConfig(Section):
    #: Empty or `sqlite:///path`: SQLite. `postgresql://user@host:port/db` (or postgres://):
    #: PostgreSQL, shared by any number of gateway processes.
    url: str = ""
    #: SQLite durability: "normal" loses nothing on a process crash; "full" also survives
    #: power loss at the cost of an fsync per commit.
    synchronous: Literal["normal", "full", "extra"] = "normal"
    #: PostgreSQL: connections per pool, per process (one pool for queries and one for
    #: the per-key advisory locks).
    pool_size: int = Field(10, ge=1, le=1000)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        if not value or value.startswith("sqlite:///"):
            return value
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme not in ("postgresql", "postgres"):
            # Only the scheme is echoed: the rest may hold a password.
            raise ValueError(
                "expected sqlite:///path or postgresql://user@host:port/database"
                f" (got scheme {scheme or 'none'!r})"
            )
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
        except ValueError as exc:
            raise ValueError(f"not a valid PostgreSQL URL: {exc}") from None
        if any(c.isspace() for c in value):
            raise ValueError("not a valid PostgreSQL URL: it contains whitespace")
        return value

    @field_serializer("url", when_used="json")
    def _mask_url(self, value: str) -> str:
        # `config check` prints the settings: never the database password.
        return redact_url(value)

    @property
    def backend(self) -> Literal["sqlite", "postgres"]:
        return "postgres" if self.url.startswith(("postgresql://", "postgres://")) else "sqlite"


def redact_url(url: str) -> str:
    """The URL without its password (in the user part or a password= parameter)."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if parts.password is None and not any(k == "password" for k, _ in pairs):
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    query = urlencode([(k, v) for k, v in pairs if k != "password"])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class SemanticConfig(Section):
    enabled: bool = False
    threshold: float = Field(0.8, ge=0.0, le=1.0)
    cooldown: Duration = timedelta(minutes=10)
    min_messages: int = Field(4, ge=0)


class LifecycleConfig(Section):
    mode: LifecycleMode = LifecycleMode.SEGMENTED
    idle_window: OptionalDuration = timedelta(hours=12)
    day_boundary: str = "04:00"
    timezone: str = "local"
    semantic: SemanticConfig = SemanticConfig()

    @field_validator("day_boundary")
    @classmethod
    def _check_boundary(cls, value: str) -> str:
        parse_day_boundary(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        resolve_timezone(value)
        return value

    def policy(self) -> LifecyclePolicy:
        return LifecyclePolicy(
            mode=self.mode,
            idle_window=self.idle_window,
            day_boundary=parse_day_boundary(self.day_boundary),
            timezone=resolve_timezone(self.timezone),
            semantic=SemanticPolicy(
                enabled=self.semantic.enabled,
                threshold=self.semantic.threshold,
                cooldown=self.semantic.cooldown,
                min_messages=self.semantic.min_messages,
            ),
        )


class ModelConfig(Section):
    provider: Literal["openai", "anthropic", "offline", "command"] = "offline"
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    command: list[str] = []
    connect_timeout: Duration = timedelta(seconds=10)
    read_timeout: Duration = timedelta(seconds=120)
    max_retries: int = Field(2, ge=0, le=10)


class AgentConfig(Section):
    """Every field is optional: a named agent inherits what it leaves unset from
    `[agents.defaults]`."""

    model: str | None = None
    fallback_models: list[str] | None = None
    control_model: str | None = None
    control_fallback_models: list[str] | None = None
    memory_window: int | None = Field(None, ge=1, le=10_000)
    token_budget: int | None = Field(None, ge=256)
    system_prompt: str | None = None
    context_files: list[str] | None = None
    #: The longest a whole turn may run (rotation, model calls, tools) before it is cut
    #: short and its key freed; a client that leaves does not extend it.
    turn_timeout: Duration | None = None
    #: `chat` (the native function-calling loop) or `plan_execute` (seed 002's planner,
    #: worker and explainer).
    runner: Runner | None = None
    #: Tools offered to the model: names or globs (`notes_*`, `time__*`, `agent__*`).
    #: Nothing is offered unless listed.
    tools: list[str] | None = None
    #: For users who are not primary, only the tools that also match one of these.
    tools_non_primary: list[str] | None = None
    #: One tool call, from start to result; a call over it returns an error result.
    tool_timeout: Duration | None = None
    #: Tool calls of one model step that run at once.
    max_parallel_tools: int | None = Field(None, ge=1, le=64)
    #: Model steps that may ask for tools in one turn; then one last call without tools.
    max_tool_steps: int | None = Field(None, ge=1, le=100)
    #: What the model sees of one tool result (head and tail, the cut marked); the store
    #: keeps the whole result.
    max_tool_result_chars: int | None = Field(None, ge=200, le=10_000_000)
    #: plan_execute: the model that writes the plan (default: the reply model).
    planner_model: str | None = None
    #: plan_execute: the most steps a plan may hold.
    max_plan_steps: int | None = Field(None, ge=1, le=50)
    #: Seed 004's safety gate before the reply model (unset: no gate).
    classifier: ClassifierConfig | None = None
    #: `script_delimiter`: the reply is a script, `---DELIMITER---`, the answer to speak.
    output_contract: OutputContract | None = None
    #: What happens to the script of a valid `script_delimiter` reply labelled AGENT.
    actions: ActionsPolicy | None = None
    #: `none`: a stateless agent: nothing is kept, the OpenAI client's message list is the
    #: whole context (one-shot requests such as a UI's title generation).
    history: Literal["keep", "none"] | None = None
    #: The `[voices]` entry replies are spoken with (`speak: true`) unless a mode has one.
    voice: str | None = None
    #: Seed 000's hybrid hand-off after the reply (unset: none; config_handoff.py).
    handoff: HandoffConfig | None = None
    #: After a complete reply, the control model pulls tasks from the exchange into the
    #: user's tasks (in the background); for whom, and with which model (default: the
    #: agent's control_model).
    extract_tasks: bool | None = None
    extract_tasks_for: ExtractTasksFor | None = None
    extract_tasks_model: str | None = None

    @field_validator("tools", "tools_non_primary")
    @classmethod
    def _tool_patterns(cls, value: list[str] | None) -> list[str] | None:
        return check_tool_patterns(value)


class LimitsConfig(Section):
    max_content_chars: int = Field(100_000, ge=1, le=10_000_000)
    max_body_bytes: int = Field(1_048_576, ge=1024)
    max_recall_results: int = Field(20, ge=1, le=200)
    #: A reply longer than this is cut, kept and marked `truncated` (and the model's
    #: stream is closed), so one runaway reply never bloats every later turn.
    max_reply_chars: int = Field(200_000, ge=100, le=50_000_000)
    #: Request line plus headers, in bytes, and how many headers: over either → 431,
    #: before any handler or authentication runs.
    max_header_bytes: int = Field(16_384, ge=1024, le=1_048_576)
    max_header_count: int = Field(100, ge=8, le=1000)
    #: A client must finish sending its headers within this time, and must keep its body
    #: arriving with no gap longer than `body_timeout`.
    header_timeout: Duration = timedelta(seconds=10)
    body_timeout: Duration = timedelta(seconds=30)
    #: How long a turn's outcome is kept for retries with its `Idempotency-Key`.
    idempotency_retention: Duration = timedelta(hours=24)
    #: A finished turn's events stay readable again (GET /v1/turns/{id}/events, a
    #: socket's `resume`) this long, in this process; at most `turn_replay_turns` of them
    #: are kept (the oldest dropped first), so memory stays bounded.
    turn_replay_retention: Duration = timedelta(minutes=10)
    turn_replay_turns: int = Field(1000, ge=0, le=1_000_000)
    #: WebSocket: the largest frame (bytes) and the deepest JSON nesting a frame may hold;
    #: a frame over either gets an error frame and the socket stays open.
    ws_max_frame_bytes: int = Field(1_048_576, ge=1024, le=64 * 1_048_576)
    ws_max_json_depth: int = Field(32, ge=2, le=1000)
    #: WebSocket frames waiting behind a running turn, per socket; one more is refused
    #: with an error frame naming it.
    ws_max_queued_frames: int = Field(64, ge=1, le=10_000)
    #: The largest file a tool may keep as an artifact (an image, audio), in bytes.
    max_artifact_bytes: int = Field(25 * 1_048_576, ge=1024, le=1_073_741_824)
    #: Images sent with a turn (`attachments`): how many, and the largest one (decoded
    #: bytes). Turn routes accept bodies large enough for them on top of max_body_bytes.
    max_attachments: int = Field(1, ge=0, le=16)
    max_attachment_bytes: int = Field(5 * 1_048_576, ge=1024, le=64 * 1_048_576)

    @property
    def ws_transport_max_bytes(self) -> int:
        """What the WebSocket server itself accepts per message (beyond it, the socket is
        closed with 1009): well above `ws_max_frame_bytes`, so a frame a little too large
        gets an error frame and the socket stays open."""
        return max(4 * self.ws_max_frame_bytes, 16 * 1_048_576)


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
    #: requests (config_openai.py, DESIGN.md §11).
    openai: OpenAIConfig = OpenAIConfig()
    #: Archive or erase keys idle longer than `idle_after` (config_retention.py).
    retention: RetentionConfig = RetentionConfig()
    #: Voices replies and `POST /v1/audio/speech` speak with (config_voice.py).
    voices: dict[str, VoiceConfig] = {}
    #: Signed webhooks for turn, rotation and task events (DESIGN.md §9, docs/hooks.md).
    hooks: list[HookConfig] = []
    #: The optional WebDAV copy of every artifact (config_artifacts.py, docs/artifacts.md).
    artifacts: ArtifactsConfig = ArtifactsConfig()

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
    for server in settings.mcp:
        if not SERVER_NAME.fullmatch(server):
            problems.append(
                f"mcp.{server}: a server name is 1-32 letters, digits or '-' (it prefixes"
                " its tools as <server>__<tool>)"
            )
    return problems


def parse_day_boundary(value: str) -> time | None:
    if value.strip().lower() in ("off", "none", "disabled", "false"):
        return None
    try:
        hours, minutes = value.split(":")
        return time(int(hours), int(minutes))
    except ValueError:
        raise ValueError(f"{value!r} is not a time of day like 04:00, or off") from None


def resolve_timezone(name: str) -> ZoneInfo:
    if name == "local":
        return local_timezone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA timezone name such as Europe/Berlin") from None


def local_timezone() -> ZoneInfo:
    """The machine's zone: $TZ, else /etc/localtime's target, else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    localtime = Path("/etc/localtime")
    if localtime.is_symlink():
        target = str(localtime.resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    for name in candidates:
        if name:
            try:
                return ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return ZoneInfo("UTC")
