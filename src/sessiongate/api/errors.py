"""Every error leaves as `{"error": {"code", "message"}}` with a 4xx status (5xx only for
an upstream model failure or a bug)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from sessiongate.core.quotas import QuotaExceeded
from sessiongate.errors import SessionGateError

log = logging.getLogger("sessiongate.api")

_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


def error_response(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers or None
    )


def error_headers(exc: SessionGateError) -> dict[str, str]:
    """The headers an error answer carries: `Retry-After` for a request over a quota."""
    if isinstance(exc, QuotaExceeded):
        return {"Retry-After": str(exc.retry_after)}
    return {}


def describe_validation(errors: list[Any]) -> tuple[str, str]:
    """(code, message) for a request validation failure, naming the fields."""
    if any(e.get("type") == "json_invalid" for e in errors):
        return "invalid_json", "the request body is not valid JSON"
    parts = []
    for error in errors[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "invalid_request", "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SessionGateError)
    async def gateway_error(request: Request, exc: SessionGateError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, **error_headers(exc))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        code, message = describe_validation(list(exc.errors()))
        return error_response(400, code, message)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _STATUS_CODES.get(exc.status_code, "error")
        message = str(exc.detail)
        if exc.status_code == 400 and "parsing the body" in message:
            # FastAPI's answer to a body it cannot decode (e.g. invalid UTF-8).
            code, message = "invalid_json", "the request body is not valid UTF-8 JSON"
        headers = dict(exc.headers or {})
        return error_response(exc.status_code, code, message, **headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", extra={"path": request.url.path})
        return error_response(500, "internal_error", "the gateway failed; see its log")
