"""Configuration: TOML, environment overrides, durations, clear errors."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from sessiongate.config import load_settings
from sessiongate.core.rotation import LifecycleMode
from sessiongate.durations import format_duration, parse_duration, parse_optional_duration
from sessiongate.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("10m", timedelta(minutes=10)),
        ("12h", timedelta(hours=12)),
        ("1d", timedelta(days=1)),
        ("1h30m", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected
    assert parse_duration(format_duration(expected)) == expected


@pytest.mark.parametrize("text", ["", "12", "h", "1x", "-5m", "1h 30", "twelve hours"])
def test_bad_durations_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_off_disables() -> None:
    assert parse_optional_duration("off") is None


def test_toml_and_environment_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "sessiongate.toml"
    config.write_text(
        '[lifecycle]\nmode = "legacy"\nidle_window = "2h"\ntimezone = "Europe/Berlin"\n'
        "[lifecycle.semantic]\nenabled = true\n"
        '[models.local]\nprovider = "offline"\n'
        '[agents.defaults]\nmodel = "local"\nmemory_window = 20\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("SESSIONGATE_LIFECYCLE__IDLE_WINDOW", "2s")
    settings = load_settings(config)
    assert settings.lifecycle.mode is LifecycleMode.LEGACY
    assert settings.lifecycle.idle_window == timedelta(seconds=2)  # env wins over the file
    assert settings.lifecycle.semantic.enabled  # untouched file values survive the merge
    policy = settings.lifecycle.policy()
    assert str(policy.timezone) == "Europe/Berlin"
    assert settings.agents["defaults"].memory_window == 20


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[lifecycle]\ntimezone = "Mars/Olympus"\n', "lifecycle.timezone"),
        ('[lifecycle]\nidle_window = "soon"\n', "lifecycle.idle_window"),
        ('[lifecycle]\nday_boundary = "25:99"\n', "lifecycle.day_boundary"),
        ("[lifecycle.semantic]\nthreshold = 1.5\n", "lifecycle.semantic.threshold"),
        ("[lifecycle]\nunknown = 1\n", "lifecycle.unknown"),
        ('[agents.defaults]\nmodel = "ghost"\n', "'ghost' is not defined"),
        ("not = [valid toml", "not valid TOML"),
    ],
)
def test_bad_config_names_the_field(tmp_path: Path, toml: str, message: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_settings(config)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "absent.toml")


def test_seed_socket_agents_must_exist(tmp_path: Path) -> None:
    from sessiongate.config import Settings
    from sessiongate.service.engine import build_engine

    settings = Settings(data_dir=tmp_path, compat={"claude_agent": "jarvis"})
    with pytest.raises(ConfigError, match=r"compat\.claude_agent"):
        build_engine(settings)


def test_config_check_catches_a_seed_endpoint_naming_no_agent(tmp_path: Path) -> None:
    # `config check` (load_settings) says what `serve` would refuse, not only build_engine.
    config = tmp_path / "one-agent.toml"
    config.write_text('[agents.theo]\nsystem_prompt = "Theo"\n[compat]\ndesktop_agent = "theo"\n')
    with pytest.raises(ConfigError, match=r"compat\.claude_agent: no agent named 'main'"):
        load_settings(config)


def test_a_named_model_is_repointed_by_one_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "models.toml"
    config.write_text(
        '[models.reply]\nprovider = "openai"\nbase_url = "http://127.0.0.1:11434/v1"\n'
        'model = "llama3.2"\nmax_retries = 5\n[agents.defaults]\nmodel = "reply"\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("SESSIONGATE_MODELS__REPLY__BASE_URL", "https://api.example/v1")
    reply = load_settings(config).models["reply"]
    assert reply.base_url == "https://api.example/v1"
    assert (reply.provider, reply.model, reply.max_retries) == ("openai", "llama3.2", 5)


@pytest.mark.parametrize(
    ("origins", "expected"),
    [
        ('["http://localhost:3000"]', ["http://localhost:3000"]),
        (
            '["HTTP://LocalHost:3000", "https://app.example:443"]',
            ["http://localhost:3000", "https://app.example"],
        ),
        ('["http://[::1]:3000"]', ["http://[::1]:3000"]),
    ],
)
def test_cors_origins_are_kept_as_a_browser_writes_them(
    tmp_path: Path, origins: str, expected: list[str]
) -> None:
    config = tmp_path / "cors.toml"
    config.write_text(f"[server]\ncors_origins = {origins}\n", encoding="utf-8")
    assert load_settings(config).server.cors_origins == expected


@pytest.mark.parametrize(
    "origin",
    ["*", "http://localhost:3000/", "localhost:3000", "ftp://host", "http://u@host", "null"],
)
def test_a_cors_origin_that_is_not_one_is_refused_at_start_up(tmp_path: Path, origin: str) -> None:
    config = tmp_path / "cors.toml"
    config.write_text(f'[server]\ncors_origins = ["{origin}"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"server\.cors_origins"):
        load_settings(config)
