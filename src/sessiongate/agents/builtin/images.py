"""`image_generate`: an image from a prompt, through an OpenAI-compatible images API
(`POST /v1/images/generations` via the official SDK), kept as an artifact of the caller.

Offered only when `[tools.images] model` names a `[models.<name>]` entry with provider
"openai"; naming anything else is a start-up error, not a tool that silently never
appears. The SDK's own retries are off: a generation is slow and billed, and a timed-out
one may still be running upstream, so the model decides whether to ask again.

The bytes are kept only when they are a PNG, JPEG or WebP image by their magic numbers:
whatever the server claims, a file served back from the gateway must be what its
Content-Type says.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sessiongate.agents.builtin.arguments import parse_arguments, schema_of
from sessiongate.agents.builtin.made_files import keep_made_file
from sessiongate.agents.tools import FunctionTool, ToolContext, ToolFailed, ToolOutput
from sessiongate.config import Settings
from sessiongate.config.models import ModelConfig
from sessiongate.config.tools import ImagesToolConfig
from sessiongate.errors import ConfigError
from sessiongate.models.base import ToolSpec
from sessiongate.models.retry import api_key_for, require_model
from sessiongate.service.artifacts import ArtifactService

NAME = "image_generate"


class ImageArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(
        min_length=1, max_length=4000, description="What the image should show, in detail."
    )


def sniff_image(data: bytes) -> str | None:
    """The media type the bytes are, by their magic numbers; None if not one we serve."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


class ImageTool:
    def __init__(
        self,
        name: str,
        model: ModelConfig,
        config: ImagesToolConfig,
        artifacts: ArtifactService,
    ) -> None:
        self.model_name = require_model(name, model)
        self.base_url = model.base_url or None
        self.api_key = api_key_for(name, model)  # read once at start-up, like the models
        self.config = config
        self.seconds = config.timeout.total_seconds()
        self.artifacts = artifacts

    async def __call__(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        wanted = parse_arguments(ImageArguments, arguments)
        data = await self._generate(wanted.prompt)
        media_type = sniff_image(data)
        if media_type is None:
            raise ToolFailed("the image service answered with something that is not an image")
        return await keep_made_file(self.artifacts, context, data, media_type, "image")

    async def _generate(self, prompt: str) -> bytes:
        # Imported here so a gateway that never generates an image never loads the SDK.
        import openai
        from openai.types import ImagesResponse

        # A client per call: a tool may run on another event loop than the one the engine
        # was built on (the CLI bootstraps on one loop and serves on the next).
        client = openai.AsyncOpenAI(
            api_key=self.api_key,
            base_url=self.base_url,
            timeout=openai.Timeout(self.seconds),
            max_retries=0,
        )
        try:
            async with asyncio.timeout(self.seconds):
                response = await client.images.generate(
                    model=self.model_name,
                    prompt=prompt,
                    n=1,
                    size=self.config.size,
                    response_format="b64_json",
                )
        except (TimeoutError, openai.APITimeoutError):
            raise ToolFailed(
                f"the image service did not answer within {self.seconds:g} s"
            ) from None
        except openai.APIConnectionError:
            raise ToolFailed("the image service could not be reached") from None
        except openai.APIStatusError as exc:
            raise ToolFailed(f"the image service answered HTTP {exc.status_code}") from None
        except openai.OpenAIError:
            raise ToolFailed("the image service answered in an unexpected shape") from None
        finally:
            await client.close()
        encoded = None
        if isinstance(response, ImagesResponse) and response.data:
            encoded = response.data[0].b64_json
        if not encoded:
            raise ToolFailed("the image service answered without an image")
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ToolFailed("the image service answered with invalid base64") from None


def image_tool(settings: Settings, artifacts: ArtifactService) -> FunctionTool | None:
    """The tool, or None when `[tools.images] model` is unset."""
    name = settings.tools.images.model
    if name is None:
        return None
    model = settings.models.get(name)
    if model is None or model.provider != "openai":
        have = sorted(n for n, m in settings.models.items() if m.provider == "openai")
        raise ConfigError(
            f"tools.images.model: {name!r} is not a [models.<name>] entry with provider"
            f' "openai" (have: {have})'
        )
    return FunctionTool(
        ToolSpec(
            NAME,
            "Generate an image from a text prompt. Returns a link to the image.",
            schema_of(ImageArguments),
        ),
        ImageTool(name, model, settings.tools.images, artifacts),
    )
