"""`video_generate`: a video from a prompt through an HTTP job API, kept as an artifact of
the caller.

Video services work in jobs: submit the prompt (`POST submit_path` → the job, with its
id), poll it (`GET status_path` until its state is one of `done_statuses` or
`failed_statuses`), then fetch the video (`GET content_path`). Every request has
`request_timeout`; the whole — submit to the last byte — has `max_wait`, after which the
job is given up (it may still finish upstream; nothing more is asked of it). The defaults
follow OpenAI's `/v1/videos`; the paths, the id and state fields and the state names are
configurable for other services (`[tools.video]`).

As with images, no text from the service reaches the model or the user (it can echo a
key or a prompt): failures are fixed sentences with an HTTP status or a state name. The
bytes are kept only when their magic numbers say MP4/QuickTime or WebM, and never beyond
`limits.max_artifact_bytes` (the download stops there).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.agents.builtin.arguments import parse_arguments, schema_of
from sessiongate.agents.builtin.made_files import keep_made_file
from sessiongate.agents.tools import FunctionTool, ToolContext, ToolFailed, ToolOutput
from sessiongate.config import Settings
from sessiongate.config.handoff import VideoToolConfig
from sessiongate.errors import ConfigError
from sessiongate.models.base import ToolSpec
from sessiongate.service.artifacts import ArtifactService

NAME = "video_generate"
#: A job id as it may appear in a URL path; anything else is not trusted.
_JOB_ID = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")
#: A state name worth repeating in a failure message.
_STATE = re.compile(r"^[A-Za-z_ -]{1,32}$")


class VideoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(
        min_length=1, max_length=4000, description="What the video should show, in detail."
    )


def sniff_video(data: bytes) -> str | None:
    """The media type the bytes are, by their magic numbers; None if not a video we serve."""
    if len(data) >= 12 and data[4:8] == b"ftyp":
        return "video/quicktime" if data[8:12] == b"qt  " else "video/mp4"
    if data.startswith(b"\x1a\x45\xdf\xa3"):
        return "video/webm"
    return None


class VideoTool:
    def __init__(self, config: VideoToolConfig, artifacts: ArtifactService, max_bytes: int) -> None:
        if config.base_url is None:
            raise ConfigError("tools.video.base_url is not set")
        self.config = config
        self.base_url = config.base_url
        self.artifacts = artifacts
        self.max_bytes = max_bytes
        self.headers: dict[str, str] = {}
        if config.api_key_env:
            key = os.environ.get(config.api_key_env, "").strip()
            if not key:
                raise ConfigError(
                    f"tools.video.api_key_env: environment variable {config.api_key_env} is not set"
                )
            self.headers["Authorization"] = f"Bearer {key}"

    async def __call__(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(VideoArguments, arguments)
        limit = self.config.max_wait.total_seconds()
        try:
            async with asyncio.timeout(limit):
                data = await self._generate(wanted.prompt)
        except TimeoutError:
            raise ToolFailed(f"the video was not ready within {limit:g} s") from None
        media_type = sniff_video(data)
        if media_type is None:
            raise ToolFailed("the video service answered with something that is not a video")
        return await keep_made_file(self.artifacts, context, data, media_type, "video")

    async def _generate(self, prompt: str) -> bytes:
        config = self.config
        timeout = httpx.Timeout(config.request_timeout.total_seconds())
        # A client per call: a tool may run on another event loop than the one the engine
        # was built on (the CLI bootstraps on one loop and serves on the next).
        async with httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=timeout
        ) as client:
            body: dict[str, Any] = {**config.parameters, "prompt": prompt}
            if config.model is not None:
                body["model"] = config.model
            job = await self._json(client, "POST", config.submit_path, body)
            job_id = job.get(config.id_field)
            if not isinstance(job_id, str | int) or not _JOB_ID.fullmatch(str(job_id)):
                raise ToolFailed("the video service answered without a job id")
            path_id = quote(str(job_id), safe="")
            status_path = config.status_path.replace("{id}", path_id)
            while not self._finished(job):
                await asyncio.sleep(config.poll_interval.total_seconds())
                job = await self._json(client, "GET", status_path, None)
            return await self._download(client, config.content_path.replace("{id}", path_id))

    def _finished(self, job: dict[str, Any]) -> bool:
        state = job.get(self.config.status_field)
        if not isinstance(state, str):
            return False  # a submit answer may carry no state yet: poll
        if state in self.config.failed_statuses:
            shown = state if _STATE.fullmatch(state) else "failed"
            raise ToolFailed(f"the video service reported the job {shown}")
        return state in self.config.done_statuses

    async def _json(
        self, client: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
    ) -> dict[str, Any]:
        try:
            response = await client.request(method, path, json=body)
        except httpx.TimeoutException:
            raise ToolFailed(
                f"the video service did not answer within"
                f" {self.config.request_timeout.total_seconds():g} s"
            ) from None
        except httpx.HTTPError:
            raise ToolFailed("the video service could not be reached") from None
        if response.status_code >= 400:
            raise ToolFailed(f"the video service answered HTTP {response.status_code}")
        try:
            value = response.json()
        except ValueError:
            raise ToolFailed("the video service answered in an unexpected shape") from None
        if not isinstance(value, dict):
            raise ToolFailed("the video service answered in an unexpected shape")
        return value

    async def _download(self, client: httpx.AsyncClient, path: str) -> bytes:
        started = time.perf_counter()
        try:
            async with client.stream("GET", path) as response:
                if response.status_code >= 400:
                    raise ToolFailed(
                        f"the video service answered HTTP {response.status_code} for the video"
                    )
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise ToolFailed(
                            f"the video is larger than limits.max_artifact_bytes"
                            f" ({self.max_bytes} bytes)"
                        )
                    chunks.append(chunk)
        except httpx.TimeoutException:
            raise ToolFailed(
                f"the video download stalled after {time.perf_counter() - started:.0f} s"
            ) from None
        except httpx.HTTPError:
            raise ToolFailed("the video could not be downloaded") from None
        return b"".join(chunks)


def video_tool(settings: Settings, artifacts: ArtifactService) -> FunctionTool | None:
    """The tool, or None when `[tools.video] base_url` is unset."""
    config = settings.tools.video
    if config.base_url is None:
        return None
    return FunctionTool(
        ToolSpec(
            NAME,
            "Generate a short video from a text prompt. Slow (minutes). Returns a link to"
            " the video.",
            schema_of(VideoArguments),
        ),
        VideoTool(config, artifacts, settings.limits.max_artifact_bytes),
    )
