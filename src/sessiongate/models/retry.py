"""What the HTTP model adapters share: the retry loop, backoff with Retry-After, the mapping
of HTTP statuses and stream failures to `ModelError` codes, and the API-key lookup.

The one rule that shapes all of it: an attempt may be retried only while nothing has been
yielded to the caller. Once text or a tool call has reached the client, a failure ends the
turn with an error instead of silently starting the answer again (or asking for a tool
call the caller already holds a second time).

What a client sees of a failure is a code and a short fixed message per category ("the
model server answered 500"); the provider's own words (its error body, the transport's
exception text) go only to the log, at WARNING under `sessiongate.models` with the model's
label, the API key and URL credentials blanked out. Provider text can echo a key, a URL
with credentials or a fragment of the prompt, and it is not ours to pass on.
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

from sessiongate.config.models import ModelConfig
from sessiongate.core.budgets import is_context_overflow
from sessiongate.errors import ConfigError, IncompleteStream, ModelError

#: The code of a request refused for passing the model's window (the turn retries it
#: once with a smaller context: service/turn/working_context.py).
CONTEXT_OVERFLOW = "context_overflow"

log = logging.getLogger("sessiongate.models")

T = TypeVar("T")

#: Local servers (Ollama, vLLM, llama.cpp) ignore the key, but the SDKs insist on one.
PLACEHOLDER_KEY = "not-needed"
#: Characters of provider text kept in a log record.
_DETAIL_LIMIT = 500


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
    """A classified failure: the error to raise (its message safe for clients), whether the
    same server deserves another attempt (only ever used before the first token), and the
    provider's own account of it, for the log only."""

    error: ModelError
    retry: bool = False
    retry_after: float | None = None
    detail: str = ""


# -- what the adapters raise inside an attempt, classified below ------------------------------


class StreamTruncated(Exception):
    """The body ended, cleanly, before the protocol's end marker."""


class BadChunk(ValueError):
    """A chunk of the wrong shape; the text says what was wrong (for the log)."""


class StreamErrorObject(Exception):
    """An error object inside an open stream; `body` is the provider's error object."""

    def __init__(self, body: object) -> None:
        super().__init__("error object in the stream")
        self.body = body


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
    anything was yielded and that `classify` marks as worth retrying. Every failed attempt
    is logged with its detail; only the classified `ModelError` is raised."""
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
                # Any chunk counts, a ToolCallChunk as much as a TextDelta: the caller holds
                # it, so a retry would answer (or ask for the tool) twice.
                started = True
                yield item
        finally:
            await attempt.aclose()
        assert failure is not None
        again = not started and failure.retry and retries < policy.max_retries
        wait = policy.delay(retries, failure.retry_after) if again else None
        log.warning(
            "model_failure",
            extra={
                "model": label,
                "code": failure.error.code,
                "detail": failure.detail,
                "after_text": started,
                "retry": retries + 1 if again else None,
                "wait_s": wait,
            },
        )
        if wait is None:
            raise failure.error from None
        retries += 1
        await sleep(wait)


# -- classification: fixed messages, details for the log ------------------------------------


def status_failure(
    status: int, headers: Mapping[str, str], detail: str, *, key_hint: str = ""
) -> Failure:
    """An HTTP error status returned before the stream began. `key_hint` (where the key
    comes from) joins the log's detail of a refused key."""
    detail = f"HTTP {status}{_suffix(detail)}"
    if status == 429:
        return Failure(
            ModelError(
                "the model server is rate limiting requests (429)",
                code="model_rate_limited",
                retryable=True,
            ),
            retry=True,
            retry_after=parse_retry_after(headers),
            detail=detail,
        )
    if status in (401, 403):
        return Failure(
            ModelError(f"the model server refused the credentials ({status})", code="model_auth"),
            detail=f"{detail}; {key_hint}" if key_hint else detail,
        )
    if status == 408:
        return Failure(timeout_error(started=False), retry=True, detail=detail)
    if status >= 500:  # includes Anthropic's 529 "overloaded"
        return Failure(
            ModelError(
                f"the model server answered {status}", code="model_unavailable", retryable=True
            ),
            retry=True,
            retry_after=parse_retry_after(headers),
            detail=detail,
        )
    if status in (400, 413) and is_context_overflow(detail):
        return Failure(
            ModelError(
                f"the request passed the model's context window ({status})",
                code=CONTEXT_OVERFLOW,
            ),
            detail=detail,
        )
    return Failure(
        ModelError(f"the model server rejected the request ({status})", code="model_bad_request"),
        detail=detail,
    )


def error_event_failure(error_type: str, detail: str, *, started: bool) -> Failure:
    """An error reported inside an already-open stream (an SSE `error` event or object);
    retried only before any text."""
    kind = error_type.lower()
    if "rate_limit" in kind:
        code, retry, message = "model_rate_limited", True, "the model server is rate limiting"
    elif "auth" in kind or "permission" in kind:
        code, retry, message = "model_auth", False, "the model server refused the credentials"
    elif "invalid_request" in kind or "not_found" in kind or "too_large" in kind:
        code, retry, message = "model_bad_request", False, "the model server rejected the request"
    elif "timeout" in kind:
        code, retry, message = "model_timeout", True, "the model timed out"
    else:  # overloaded_error, api_error, server_error and anything unknown
        code, retry, message = "model_unavailable", True, "the model server reported an error"
    return Failure(
        ModelError(message + (" mid-reply" if started else ""), code=code, retryable=retry),
        retry=retry and not started,
        detail=f"error in the stream ({error_type or 'no type'}){_suffix(detail)}",
    )


def timeout_error(*, started: bool) -> ModelError:
    where = "mid-reply" if started else "before answering"
    return ModelError(f"the model timed out {where}", code="model_timeout", retryable=True)


def unreachable_failure(exc: BaseException, secret: str) -> Failure:
    """The request never got an answer's head: nothing listening, a reset, DNS, TLS."""
    message = (
        "the model server refused the connection"
        if _in_chain(exc, ConnectionRefusedError)
        else "the model server could not be reached"
    )
    return Failure(
        ModelError(message, code="model_unavailable", retryable=True),
        retry=True,
        detail=describe(exc, secret),
    )


def dropped_failure(exc: BaseException, secret: str, *, started: bool) -> Failure:
    """The connection broke while the body streamed."""
    if started:
        error = ModelError(
            "the model server closed the connection mid-reply",
            code="model_stream_interrupted",
            retryable=True,
        )
        return Failure(error, detail=describe(exc, secret))
    error = ModelError(
        "the model server closed the connection before answering",
        code="model_unavailable",
        retryable=True,
    )
    return Failure(error, retry=True, detail=describe(exc, secret))


def truncated_failure(*, started: bool) -> Failure:
    """A body that ended without the end marker. After text: the text stands, marked
    incomplete (never retried: it reached the client). Before any text: a server that
    answered nothing at all, tried again like a dropped connection."""
    return Failure(
        IncompleteStream(),
        retry=not started,
        detail="the body ended before the end marker" + (" after text" if started else ""),
    )


def bad_response(detail: str) -> Failure:
    return Failure(
        ModelError("the model's reply could not be parsed", code="model_bad_response"),
        detail=detail,
    )


def unexpected_failure(exc: Exception, secret: str) -> Failure:
    return Failure(
        ModelError("the model call failed", code="model_error"), detail=describe(exc, secret)
    )


def error_detail(body: object, secret: str) -> tuple[str, str]:
    """`(error type, message)` from an error body of either provider, trimmed and redacted:
    for the log only."""
    error: Any = body.get("error", body) if isinstance(body, Mapping) else body
    kind, message = "", ""
    if isinstance(error, Mapping):
        kind = str(error.get("type") or error.get("code") or "")
        message = str(error.get("message") or "")
    elif isinstance(error, str):
        message = error
    return kind, redact(message, secret)


def describe(exc: BaseException, secret: str) -> str:
    """An exception and its causes as one redacted line, for the log."""
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 4:
        text = str(seen)
        parts.append(f"{type(seen).__name__}: {text}" if text else type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    return redact(" <- ".join(parts), secret)


def redact(text: str, secret: str) -> str:
    """One line, trimmed, with the key, key-like tokens and URL credentials blanked out."""
    text = " ".join(text.split())[:_DETAIL_LIMIT]
    if secret and secret != PLACEHOLDER_KEY:
        text = text.replace(secret, "[redacted]")
    text = _URL_USERINFO.sub("//[redacted]@", text)
    text = _URL_SECRET_PARAM.sub(r"\1=[redacted]", text)
    return _KEYLIKE.sub("[redacted]", text)


_KEYLIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,})")
_URL_USERINFO = re.compile(r"//[^/\s@]+@")
_URL_SECRET_PARAM = re.compile(r"\b((?:api[_-]?)?key|token|secret|password)=[^&\s]+", re.I)


def _in_chain(exc: BaseException, kind: type[BaseException]) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def refused(exc: BaseException) -> bool:
    """A refused or reset connection somewhere in the cause chain."""
    return _in_chain(exc, ConnectionError)


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
