"""What the HTTP model adapters share: the retry loop, backoff with Retry-After, the mapping
of HTTP statuses and stream failures to `ModelError` codes, and the API-key lookup.

The one rule that shapes all of it: an attempt may be retried only while nothing has been
yielded to the caller. Once text has reached the client, a failure ends the turn with an
error instead of silently starting the answer again.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from sessiongate.config import ModelConfig
from sessiongate.errors import ConfigError, ModelError

log = logging.getLogger("sessiongate.models")

T = TypeVar("T")

#: Local servers (Ollama, vLLM, llama.cpp) ignore the key, but the SDKs insist on one.
PLACEHOLDER_KEY = "not-needed"
_DETAIL_LIMIT = 200


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff without jitter: a gateway is one client, not a fleet, and a
    deterministic schedule keeps tests fast and exact."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    #: A server asking for a longer pause than this is treated as asking for this.
    max_retry_after: float = 30.0

    def delay(self, retry_number: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return float(min(self.base_delay * 2**retry_number, self.max_delay))


@dataclass(frozen=True, slots=True)
class Failure:
    """A classified failure: the error to raise, and whether the same server deserves
    another attempt (only ever used before the first token)."""

    error: ModelError
    retry: bool = False
    retry_after: float | None = None


class StreamTruncated(Exception):
    """The body ended cleanly but before the protocol's end marker."""


Classifier = Callable[[Exception, bool], Failure]


async def stream_with_retries(
    open_attempt: Callable[[], AsyncGenerator[T, None]],
    classify: Classifier,
    policy: RetryPolicy,
    *,
    label: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[T]:
    """Run attempts until one streams to its end; retry only failures that happen before
    anything was yielded and that `classify` marks as worth retrying."""
    retries = 0
    while True:
        attempt = open_attempt()
        started = False
        failure: Failure | None = None
        try:
            while True:
                try:
                    item = await anext(attempt)
                except StopAsyncIteration:
                    return
                except ModelError as exc:  # the adapter already said what went wrong
                    failure = Failure(exc)
                    break
                except Exception as exc:
                    failure = classify(exc, started)
                    break
                started = True
                yield item
        finally:
            await attempt.aclose()
        assert failure is not None
        if started or not failure.retry or retries >= policy.max_retries:
            raise failure.error from None
        wait = policy.delay(retries, failure.retry_after)
        retries += 1
        log.warning(
            "model_retry",
            extra={"model": label, "code": failure.error.code, "retry": retries, "wait_s": wait},
        )
        await sleep(wait)


# -- classification ---------------------------------------------------------------------


def status_failure(
    label: str, status: int, headers: Mapping[str, str], detail: str, key_hint: str
) -> Failure:
    """An HTTP error status returned before the stream began."""
    if status == 429:
        return Failure(
            ModelError(
                f"{label} is rate limited (HTTP 429)", code="model_rate_limited", retryable=True
            ),
            retry=True,
            retry_after=parse_retry_after(headers),
        )
    if status in (401, 403):
        # The server's text is left out on purpose: some echo a fragment of the key.
        return Failure(
            ModelError(
                f"{label} refused the credentials (HTTP {status}); {key_hint}", code="model_auth"
            )
        )
    if status == 408:
        return Failure(timeout_error(label, started=False), retry=True)
    if status >= 500:  # includes Anthropic's 529 "overloaded"
        return Failure(
            ModelError(
                f"{label} is unavailable (HTTP {status}){_suffix(detail)}",
                code="model_unavailable",
                retryable=True,
            ),
            retry=True,
            retry_after=parse_retry_after(headers),
        )
    return Failure(
        ModelError(
            f"{label} rejected the request (HTTP {status}){_suffix(detail)}",
            code="model_bad_request",
        )
    )


def error_event_failure(label: str, error_type: str, detail: str) -> Failure:
    """An error reported inside an already-open stream (an SSE `error` event or object)."""
    kind = error_type.lower()
    if "rate_limit" in kind:
        code, retry = "model_rate_limited", True
    elif "auth" in kind or "permission" in kind:
        return Failure(ModelError(f"{label} refused the credentials mid-stream", code="model_auth"))
    elif "invalid_request" in kind or "not_found" in kind or "too_large" in kind:
        code, retry = "model_bad_request", False
    elif "timeout" in kind:
        code, retry = "model_timeout", True
    else:  # overloaded_error, api_error, server_error and anything unknown
        code, retry = "model_unavailable", True
    message = f"{label} reported an error in its stream ({error_type or 'unknown'})"
    return Failure(ModelError(message + _suffix(detail), code=code, retryable=retry), retry=retry)


def timeout_error(label: str, *, started: bool) -> ModelError:
    where = "mid-reply" if started else "before answering"
    return ModelError(f"{label} timed out {where}", code="model_timeout", retryable=True)


def connection_failure(label: str, *, started: bool) -> Failure:
    if started:
        return Failure(
            ModelError(
                f"{label} dropped the connection mid-reply; the partial reply is discarded",
                code="model_stream_interrupted",
                retryable=True,
            )
        )
    return Failure(
        ModelError(f"{label} could not be reached", code="model_unavailable", retryable=True),
        retry=True,
    )


def bad_response(label: str, what: str) -> ModelError:
    return ModelError(f"{label} sent a malformed stream: {what}", code="model_bad_response")


def unexpected_failure(label: str, exc: Exception) -> Failure:
    return Failure(ModelError(f"{label} failed: {type(exc).__name__}", code="model_error"))


def error_detail(body: object, secret: str) -> tuple[str, str]:
    """`(error type, message)` from an error body of either provider, trimmed and with the
    API key blanked out in case a server echoes it."""
    error: Any = body.get("error", body) if isinstance(body, Mapping) else body
    kind, message = "", ""
    if isinstance(error, Mapping):
        kind = str(error.get("type") or error.get("code") or "")
        message = str(error.get("message") or "")
    elif isinstance(error, str):
        message = error
    message = " ".join(message.split())[:_DETAIL_LIMIT]
    if secret and secret != PLACEHOLDER_KEY:
        message = message.replace(secret, "[redacted]")
    return kind, _KEYLIKE.sub("[redacted]", message)


_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,})")


def _suffix(detail: str) -> str:
    return f": {detail}" if detail else ""


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(float(millis) / 1000, 0.0)
        except ValueError:
            pass
    value = (headers.get("retry-after") or "").strip()
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


# -- configuration ------------------------------------------------------------------------


def api_key_for(name: str, config: ModelConfig) -> str:
    """The key named by `api_key_env`, read once at start-up; a placeholder without one."""
    if not config.api_key_env:
        return PLACEHOLDER_KEY
    key = os.environ.get(config.api_key_env, "").strip()
    if not key:
        raise ConfigError(
            f"models.{name}.api_key_env: environment variable {config.api_key_env} is not set"
        )
    return key


def key_hint(name: str, config_env: str | None) -> str:
    if config_env:
        return f"check the key in ${config_env}"
    return f"set models.{name}.api_key_env to the variable holding the key"


def require_model(name: str, config: ModelConfig) -> str:
    if not config.model:
        raise ConfigError(
            f"models.{name}.model: provider {config.provider!r} needs the model name to request"
        )
    return config.model


def sdk_adapter_kwargs(name: str, config: ModelConfig) -> dict[str, Any]:
    """The constructor arguments the SDK adapters share, from one `[models.<name>]`."""
    return {
        "model": require_model(name, config),
        "base_url": config.base_url or None,
        "api_key": api_key_for(name, config),
        "api_key_env": config.api_key_env,
        "connect_timeout": config.connect_timeout.total_seconds(),
        "read_timeout": config.read_timeout.total_seconds(),
        "max_retries": config.max_retries,
    }
