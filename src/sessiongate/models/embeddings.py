"""The embeddings port, and its two adapters: a local model shipped inside a PyPI package
("builtin": WordLlama) and any OpenAI-compatible `/v1/embeddings` server (OpenAI, Ollama,
vLLM) through the official SDK.

Every adapter answers with L2-normalised float32 rows, so a cosine similarity is a dot
product wherever vectors meet (numpy here, and a peer store in the benchmark).

`name` identifies the vectors an embedder makes (model and size); it is stored with each
chunk vector, and a search compares only vectors of the embedder configured now.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sessiongate.config import Settings
from sessiongate.config.models import ModelConfig
from sessiongate.core.notes import Vectors
from sessiongate.errors import ConfigError, SessionGateError
from sessiongate.models.retry import api_key_for, require_model

log = logging.getLogger("sessiongate.notes")

BUILTIN = "builtin"
#: WordLlama's default configuration; its weights and tokenizer ship in the wheel.
WORDLLAMA_CONFIG = "l2_supercat"
WORDLLAMA_DIMENSIONS = 256
#: Texts per request to an embeddings server (OpenAI accepts 2,048; smaller servers less).
OPENAI_BATCH = 128
#: Fewer texts than this are embedded on the event loop (tens of microseconds each);
#: more go to a thread so a large import does not stall every other request.
INLINE_TEXTS = 16


class EmbeddingsFailed(SessionGateError):
    """The embeddings model could not embed the texts (unreachable, refused, odd answer)."""

    code = "embeddings_failed"
    status = 502


class Embedder(Protocol):
    name: str
    dimensions: int

    async def start(self) -> None:
        """Load or connect; idempotent. `embed` also starts it when needed."""
        ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, in order: shape (len(texts), dimensions)."""
        ...

    async def aclose(self) -> None:
        """Release what is bound to the running event loop (HTTP clients)."""
        ...


def normalised(matrix: Any, dimensions: int | None = None) -> Vectors:
    """Rows scaled to unit length (all-zero rows stay zero: they match nothing)."""
    try:
        vectors = np.asarray(matrix, dtype=np.float32)
    except (TypeError, ValueError):  # ragged rows, strings, nested junk from a server
        raise _unexpected() from None
    if vectors.ndim != 2 or (dimensions is not None and vectors.shape[1] != dimensions):
        raise EmbeddingsFailed(f"embeddings of an unexpected shape {vectors.shape}")
    if not np.isfinite(vectors).all():
        raise EmbeddingsFailed("embeddings hold values that are not finite numbers")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: Vectors = (vectors / norms).astype(np.float32, copy=False)
    return unit


def wordllama_folder() -> Path:
    """The installed wordllama package: its wheel holds weights/ and tokenizers/."""
    import wordllama  # type: ignore[import-untyped]

    return Path(wordllama.__file__).resolve().parent


class WordLlamaEmbedder:
    """`[notes] embeddings = "builtin"`: WordLlama's 256-dimension model. Its weights are
    inside the installed package; loading points the cache at that folder and forbids any
    download, so a missing file is an error at start-up, never a fetch from the network."""

    def __init__(self) -> None:
        self.name = f"wordllama:{WORDLLAMA_CONFIG}:{WORDLLAMA_DIMENSIONS}"
        self.dimensions = WORDLLAMA_DIMENSIONS
        self._model: Any = None
        self._loading = asyncio.Lock()

    @staticmethod
    def load() -> Any:
        try:
            from wordllama import WordLlama
        except ImportError:
            raise ConfigError(
                'notes.embeddings = "builtin" needs the wordllama package'
                " (pip install 'sessiongate[embeddings]')"
            ) from None
        try:
            return WordLlama.load(
                config=WORDLLAMA_CONFIG,
                dim=WORDLLAMA_DIMENSIONS,
                cache_dir=wordllama_folder(),
                disable_download=True,
            )
        except FileNotFoundError as exc:
            raise ConfigError(f'notes.embeddings = "builtin": {exc}') from None

    async def start(self) -> None:
        async with self._loading:
            if self._model is None:
                # About a quarter of a second (16 MB of weights): not on the event loop.
                self._model = await asyncio.to_thread(self.load)

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if self._model is None:
            await self.start()
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        model = self._model
        if len(texts) < INLINE_TEXTS:
            raw = model.embed(list(texts), norm=False)
        else:
            raw = await asyncio.to_thread(model.embed, list(texts), norm=False)
        return normalised(raw, self.dimensions)

    async def aclose(self) -> None:
        return None  # nothing bound to a loop; the weights stay loaded


class OpenAIEmbedder:
    """`[notes] embeddings = "<model name>"`: `POST {base_url}/embeddings` of that
    `[models.<name>]` entry (provider "openai"), through the official SDK. The vector size
    is learnt from the first answer."""

    def __init__(self, model_name: str, config: ModelConfig) -> None:
        self.model = require_model(model_name, config)
        self.base_url = config.base_url or None
        self.api_key = api_key_for(model_name, config)  # read once at start-up
        self.timeout = config.read_timeout.total_seconds()
        self.connect_timeout = config.connect_timeout.total_seconds()
        self.max_retries = config.max_retries
        self.name = f"openai:{self.model}"
        self.dimensions = 0  # unknown until the server answers
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client_for_loop(self) -> Any:
        import openai

        loop = asyncio.get_running_loop()
        # A client belongs to the loop it was made on (the CLI bootstraps on one loop and
        # serves on the next): a new loop gets a new client.
        if self._client is None or self._loop is not loop:
            self._client = openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self.base_url,
                timeout=openai.Timeout(self.timeout, connect=self.connect_timeout),
                max_retries=self.max_retries,
            )
            self._loop = loop
        return self._client

    async def start(self) -> None:
        return None  # connects at the first request

    async def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        rows: list[Any] = []
        for start in range(0, len(texts), OPENAI_BATCH):
            rows.extend(await self._request(list(texts[start : start + OPENAI_BATCH])))
        vectors = normalised(rows, self.dimensions or None)
        if not self.dimensions:
            self.dimensions = int(vectors.shape[1])
        return vectors

    async def _request(self, texts: list[str]) -> list[Any]:
        import openai

        client = self._client_for_loop()
        try:
            response = await client.embeddings.create(
                model=self.model, input=texts, encoding_format="float"
            )
        except openai.APITimeoutError:
            raise EmbeddingsFailed("the embeddings server did not answer in time") from None
        except openai.APIConnectionError:
            raise EmbeddingsFailed("the embeddings server could not be reached") from None
        except openai.APIStatusError as exc:
            raise EmbeddingsFailed(
                f"the embeddings server answered HTTP {exc.status_code}"
            ) from None
        except openai.OpenAIError:
            raise _unexpected() from None
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != len(texts):
            raise EmbeddingsFailed("the embeddings server answered with a wrong number of vectors")
        # `index` says which input a vector belongs to; servers may answer out of order.
        try:
            ordered = sorted(data, key=lambda item: int(item.index))
            if [int(item.index) for item in ordered] != list(range(len(texts))):
                raise ValueError("indexes")
            return [list(item.embedding) for item in ordered]
        except (TypeError, ValueError, AttributeError):
            raise _unexpected() from None

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            try:
                await client.close()
            except RuntimeError:  # made on a loop that is gone: nothing left to close
                log.debug("embeddings_client_close_skipped")


def _unexpected() -> EmbeddingsFailed:
    return EmbeddingsFailed("the embeddings server answered in an unexpected shape")


def build_embedder(settings: Settings) -> Embedder | None:
    """The embedder `[notes] embeddings` names, or None (keyword search only). A name that
    is neither "builtin" nor an openai `[models.<name>]` entry is a start-up error."""
    choice = settings.notes.embeddings
    if choice is None:
        return None
    if choice == BUILTIN:
        return WordLlamaEmbedder()
    model = settings.models.get(choice)
    if model is None or model.provider != "openai":
        have = sorted(n for n, m in settings.models.items() if m.provider == "openai")
        raise ConfigError(
            f'notes.embeddings: {choice!r} is neither "builtin" nor a [models.<name>] entry'
            f' with provider "openai" (have: {have})'
        )
    return OpenAIEmbedder(choice, model)
