"""Budgets per model (issue 21, DESIGN.md §12): configured, else known, else 8192; the
reply's reserve; the agent's budget is its smallest model's; the estimate's correction."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sessiongate.config import Settings
from sessiongate.config.agents import AgentConfig
from sessiongate.config.models import ModelConfig
from sessiongate.config.working_set import WorkingSetConfig
from sessiongate.core.budgets import (
    DEFAULT_CONTEXT_WINDOW,
    MAX_RATIO,
    MIN_RATIO,
    corrected_ratio,
    known_window,
    resolve_budget,
)
from sessiongate.core.events import EndEvent
from sessiongate.service.agents import build_profiles
from sessiongate.service.budgets import (
    TokenCalibration,
    agent_budget,
    observe_prompt_tokens,
    working_set_policy,
)


def test_known_models_by_longest_prefix() -> None:
    assert known_window("gpt-4o-mini") == 128_000
    assert known_window("gpt-4-0613") == 8_192
    assert known_window("llama3:8b") == 8_192
    assert known_window("llama3.1:8b") == 131_072
    assert known_window("meta-llama/Meta-Llama-3.1-8B-Instruct") == 131_072
    assert known_window("Llama-3.2-3B-Instruct") == 131_072
    assert known_window("some-local-model") is None
    assert known_window(None) is None


def test_budget_configured_then_known_then_default() -> None:
    configured = resolve_budget(configured_window=4096, upstream_name="gpt-4o")
    assert (configured.window, configured.reserve, configured.source) == (4096, 1024, "configured")
    assert configured.tokens == 3072
    known = resolve_budget(configured_window=None, upstream_name="gpt-4o")
    assert (known.window, known.reserve, known.source) == (128_000, 4096, "known")
    default = resolve_budget(configured_window=None, upstream_name="mystery")
    assert (default.window, default.source) == (DEFAULT_CONTEXT_WINDOW, "default")
    assert default.reserve == 2048


def test_reserve_is_configured_but_never_more_than_half_the_window() -> None:
    assert (
        resolve_budget(configured_window=4096, upstream_name=None, reserve_tokens=500).reserve
        == 500
    )
    assert (
        resolve_budget(configured_window=4096, upstream_name=None, reserve_tokens=9000).reserve
        == 2048
    )


def test_agent_budget_is_the_smallest_of_its_models_and_none_offline() -> None:
    models = {
        "big": ModelConfig(provider="openai", model="gpt-4o"),
        "small": ModelConfig(provider="openai", model="x", context_window=4096),
        "off": ModelConfig(provider="offline"),
    }
    policy = working_set_policy(None, AgentConfig())
    assert agent_budget(models, AgentConfig(model="big"), policy) == 128_000 - 4096
    both = AgentConfig(model="big", fallback_models=["small"])
    assert agent_budget(models, both, policy) == 3072
    assert agent_budget(models, AgentConfig(model="off"), policy) is None
    assert agent_budget(models, AgentConfig(), policy) is None
    sized = {"off": ModelConfig(provider="offline", context_window=2048)}
    assert agent_budget(sized, AgentConfig(model="off"), policy) == 1536


def test_context_section_merges_field_by_field_into_the_profile() -> None:
    settings = Settings(
        models={"m": ModelConfig(provider="openai", model="x", context_window=10_000)},
        agents={
            "defaults": AgentConfig(model="m", context=WorkingSetConfig(keep_recent=4)),
            "main": AgentConfig(context=WorkingSetConfig(reserve_tokens=1000)),
            "seed4": AgentConfig(context=WorkingSetConfig(compaction="off")),
        },
    )
    profiles = build_profiles(settings)
    main, seed4 = profiles["main"], profiles["seed4"]
    assert main.working_set.keep_recent == 4
    assert main.working_set.compaction == "auto"
    assert main.context_budget == 9000
    assert seed4.working_set.compaction == "off"
    assert seed4.working_set.keep_recent == 4
    assert seed4.context_budget == 7500


@given(
    st.floats(MIN_RATIO, MAX_RATIO),
    st.integers(-5, 10**7),
    st.integers(-5, 10**7),
)
def test_correction_stays_bounded(previous: float, estimated: int, reported: int) -> None:
    ratio = corrected_ratio(previous, estimated=estimated, reported=reported)
    assert MIN_RATIO <= ratio <= MAX_RATIO


def test_correction_moves_towards_the_reported_count() -> None:
    calibration = TokenCalibration()
    assert calibration.ratio("m") == 1.0
    for _ in range(30):
        calibration.observe("m", estimated=1000, reported=1300)
    assert abs(calibration.ratio("m") - 1.3) < 0.01
    calibration.observe("m", estimated=0, reported=50)  # nothing to compare: unchanged
    assert abs(calibration.ratio("m") - 1.3) < 0.01
    for _ in range(30):
        calibration.observe("n", estimated=100, reported=10_000)
    assert MAX_RATIO - 0.01 < calibration.ratio("n") <= MAX_RATIO


def test_context_overflow_answers_are_recognised() -> None:
    from sessiongate.core.budgets import is_context_overflow
    from sessiongate.models.retry import CONTEXT_OVERFLOW, error_detail, status_failure

    openai_body = {
        "error": {
            "message": "This model's maximum context length is 4096 tokens. However, your "
            "messages resulted in 5000 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    _, detail = error_detail(openai_body, "")
    assert status_failure(400, {}, detail).error.code == CONTEXT_OVERFLOW
    llama_cpp = "the request exceeds the available context size, try increasing it"
    assert status_failure(400, {}, llama_cpp).error.code == CONTEXT_OVERFLOW
    assert is_context_overflow("prompt is too long: 210000 tokens > 200000 maximum")
    assert status_failure(400, {}, "unknown field 'foo'").error.code == "model_bad_request"
    assert not is_context_overflow("rate limited")


def test_a_summary_fits_the_summary_models_window_when_it_is_smaller() -> None:
    settings = Settings(
        models={
            "big": ModelConfig(provider="openai", model="gpt-4o"),
            "small": ModelConfig(provider="openai", model="x", context_window=4096),
        },
        agents={
            "main": AgentConfig(model="big", control_model="small"),
            "own": AgentConfig(model="small", context=WorkingSetConfig(summary_model="big")),
        },
    )
    profiles = build_profiles(settings)
    assert profiles["main"].context_budget == 128_000 - 4096
    assert profiles["main"].summary_budget == 3072  # the control model summarises
    assert profiles["own"].summary_budget == profiles["own"].context_budget == 3072


def test_usage_the_gateway_estimated_teaches_the_calibration_nothing() -> None:
    calibration = TokenCalibration()
    estimated = EndEvent(None, 2, {"prompt_tokens": 3000, "estimated": 1})
    observe_prompt_tokens(calibration, "m", [estimated], estimate=1000)
    assert calibration.ratio("m") == 1.0
    measured = EndEvent(None, 2, {"prompt_tokens": 1300})
    observe_prompt_tokens(calibration, "m", [measured], estimate=1000)
    assert calibration.ratio("m") > 1.0
