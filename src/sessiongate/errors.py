"""Typed errors. Each carries a stable machine-readable code and an HTTP-style status.

Transports map these to `{"error": {"code", "message"}}` answers; nothing here knows
about HTTP beyond the number.
"""

from __future__ import annotations


class SessionGateError(Exception):
    """Base class: every error the gateway raises on purpose."""

    code: str = "error"
    status: int = 400

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}


class ConfigError(SessionGateError, ValueError):
    """A configuration problem found at start-up, with one line per bad field."""

    code = "invalid_config"
    status = 500


class MigrationError(SessionGateError):
    """The database schema cannot be brought to this version (edited or newer migrations)."""

    code = "migration_failed"
    status = 500


class Unauthorized(SessionGateError):
    code = "unauthorized"
    status = 401


class Forbidden(SessionGateError):
    code = "forbidden"
    status = 403


class InvalidInput(SessionGateError):
    code = "invalid_input"
    status = 400


class InvalidSessionKey(InvalidInput):
    code = "invalid_session_key"


class InvalidSessionId(InvalidInput):
    code = "invalid_session_id"


class InvalidContent(InvalidInput):
    code = "invalid_content"


class ContentTooLarge(SessionGateError):
    code = "content_too_large"
    status = 413


class NotFound(SessionGateError):
    code = "not_found"
    status = 404


class SessionNotFound(NotFound):
    """The key does not exist, or belongs to someone else (never say which)."""

    code = "session_not_found"


class SegmentNotFound(NotFound):
    code = "segment_not_found"


class Conflict(SessionGateError):
    code = "conflict"
    status = 409


class NothingToRevert(Conflict):
    code = "nothing_to_revert"


class KeyExists(Conflict):
    code = "session_key_exists"


class ImmutableSegment(Conflict):
    """A write reached an archived segment. The store refuses it."""

    code = "segment_immutable"


class ImportFormatError(InvalidInput):
    """An export file line is malformed; `line` is 1-based."""

    code = "invalid_import"

    def __init__(self, message: str, *, line: int | None = None) -> None:
        prefix = f"line {line}: " if line is not None else ""
        super().__init__(prefix + message)
        self.line = line


class ModelError(SessionGateError):
    """The reply or control model failed. `retryable` drives fallback and retries."""

    code = "model_error"
    status = 502

    def __init__(self, message: str, *, code: str | None = None, retryable: bool = False) -> None:
        super().__init__(message, code=code)
        self.retryable = retryable


class IncompleteStream(ModelError):
    """The provider's stream ended without its end marker (no finish reason, no [DONE]):
    whatever text came is kept as `interrupted`, never as a complete reply."""

    code = "stream_incomplete"

    def __init__(self, message: str = "the model's stream ended before its end marker") -> None:
        super().__init__(message, retryable=False)


class TurnTimeout(SessionGateError):
    """A whole turn ran past its agent's `turn_timeout`; the key is freed."""

    code = "turn_timeout"
    status = 504


class PlanRejected(SessionGateError):
    """plan_execute: the planner's plan was invalid, and so was its one repair."""

    code = "invalid_plan"
    status = 422
