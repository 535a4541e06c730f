"""`video_generate` against a local video job API (tests/support/video_jobs.py, 127.0.0.1
only): submit, poll until done, fetch, keep the video as an artifact; and every way a job
can go wrong — it fails, it never finishes, the service refuses or is not there, the
bytes are not a video."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiongate.agents.builtin.video import NAME, sniff_video
from sessiongate.agents.tools import Tool, ToolContext
from sessiongate.config import Settings
from sessiongate.core.keys import KeyRef
from sessiongate.errors import ConfigError
from sessiongate.service.engine import Engine, build_engine
from tests.support.fake_providers import closed_port
from tests.support.video_jobs import MP4, VideoJobs, video_jobs

CONTEXT = ToolContext("alice", False, KeyRef("alice", "chat:alice"), "main", "turn-1")
KEY_ENV = "SG_TEST_VIDEO_KEY"


@pytest.fixture
def jobs() -> Iterator[VideoJobs]:
    with video_jobs(polls=2) as state:
        yield state


def _settings(tmp_path: Path, **video: Any) -> Settings:
    config = {"poll_interval": "10ms", "max_wait": "3s", "request_timeout": "2s", **video}
    return Settings(data_dir=tmp_path, tools={"video": config})


@pytest.fixture
async def engine(tmp_path: Path, jobs: VideoJobs) -> AsyncIterator[Engine]:
    built = build_engine(_settings(tmp_path, base_url=jobs.url, model="sora-2"))
    yield built
    await built.aclose()


async def _tool(engine: Engine) -> Tool:
    tools = await engine.tools.all_tools()
    return tools[NAME]


async def test_a_video_is_submitted_polled_fetched_and_kept(
    engine: Engine, jobs: VideoJobs
) -> None:
    tool = await _tool(engine)
    assert tool.spec.parameters["required"] == ["prompt"]
    output = await tool.call({"prompt": "waves at sunset"}, CONTEXT)
    assert not output.is_error, output.content
    (artifact_id,) = output.artifact_ids
    assert (
        output.content
        == f"Generated the video: /v1/artifacts/{artifact_id} (video/mp4, {len(MP4)} bytes)."
    )
    assert jobs.paths() == [
        "POST /v1/videos",
        "GET /v1/videos/video_1",
        "GET /v1/videos/video_1",
        "GET /v1/videos/video_1",
        "GET /v1/videos/video_1/content",
    ]
    assert jobs.requests[0][2] == {"prompt": "waves at sunset", "model": "sora-2"}
    assert jobs.authorization == [None]
    assert engine.artifacts is not None
    artifact, data = await engine.artifacts.read("alice", artifact_id)
    assert (artifact.media_type, data) == ("video/mp4", MP4)
    assert artifact.key == "chat:alice"


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        ("explode please", "the video service reported the job failed"),
        ("reject this", "the video service answered HTTP 500"),
        ("not a video", "the video service answered with something that is not a video"),
    ],
)
async def test_a_job_that_goes_wrong_is_an_error_result(
    engine: Engine, prompt: str, message: str
) -> None:
    tool = await _tool(engine)
    registry_result = await engine.tools.call(
        {NAME: tool}, "c1", NAME, f'{{"prompt": "{prompt}"}}', CONTEXT, limit_seconds=10
    )
    assert registry_result.status == "error"
    assert registry_result.content == f"error: {message}"
    assert "SECRET" not in registry_result.content


async def test_a_job_that_never_finishes_is_given_up_at_max_wait(
    tmp_path: Path, jobs: VideoJobs
) -> None:
    engine = build_engine(_settings(tmp_path, base_url=jobs.url, max_wait="300ms"))
    try:
        tool = await _tool(engine)
        result = await engine.tools.call(
            {NAME: tool}, "c1", NAME, '{"prompt": "spin forever"}', CONTEXT, limit_seconds=10
        )
    finally:
        await engine.aclose()
    assert result.content == "error: the video was not ready within 0.3 s"
    polls = [p for p in jobs.paths() if p.startswith("GET")]
    assert 3 <= len(polls) <= 40 and not any(p.endswith("/content") for p in polls)


async def test_an_unreachable_service_and_a_key_from_the_environment(
    tmp_path: Path, jobs: VideoJobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = build_engine(_settings(tmp_path, base_url=f"http://127.0.0.1:{closed_port()}"))
    try:
        tool = await _tool(engine)
        result = await engine.tools.call(
            {NAME: tool}, "c1", NAME, '{"prompt": "x"}', CONTEXT, limit_seconds=10
        )
    finally:
        await engine.aclose()
    assert result.content == "error: the video service could not be reached"

    with pytest.raises(ConfigError, match=KEY_ENV):
        build_engine(_settings(tmp_path / "a", base_url=jobs.url, api_key_env=KEY_ENV))
    monkeypatch.setenv(KEY_ENV, "sk-video-test")
    engine = build_engine(_settings(tmp_path / "b", base_url=jobs.url, api_key_env=KEY_ENV))
    try:
        output = await (await _tool(engine)).call({"prompt": "a cat"}, CONTEXT)
    finally:
        await engine.aclose()
    assert not output.is_error
    assert jobs.authorization == ["Bearer sk-video-test"]


async def test_the_tool_exists_only_when_configured(tmp_path: Path) -> None:
    engine = build_engine(Settings(data_dir=tmp_path))
    try:
        assert NAME not in await engine.tools.all_tools()
    finally:
        await engine.aclose()
    with pytest.raises(ValueError, match="http"):
        _settings(tmp_path, base_url="ftp://example.org")
    with pytest.raises(ValueError, match="starts with /"):
        _settings(tmp_path, base_url="http://127.0.0.1", status_path="v1/videos/{id}")


def test_sniff_video() -> None:
    assert sniff_video(MP4) == "video/mp4"
    assert sniff_video(b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00") == "video/quicktime"
    assert sniff_video(b"\x1a\x45\xdf\xa3rest") == "video/webm"
    assert sniff_video(b"<html>") is None
    assert sniff_video(b"") is None
