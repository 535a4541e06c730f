"""Configuration of the listening server (`[server]`): address, workers, the WebSocket
authentication deadline, the access log, the token a metrics scraper may use and the
browser origins allowed to call the gateway (CORS)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

from pydantic import Field, field_serializer, field_validator

from sessiongate.config.base import Duration, Section


class ServerConfig(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    #: A WebSocket must send its API key as the first frame within this time.
    ws_auth_timeout: Duration = timedelta(seconds=10)
    #: One log line per HTTP request (uvicorn's access log); turns are logged regardless.
    access_log: bool = False
    #: Worker processes on the one listening socket. More than one needs PostgreSQL.
    workers: int = Field(1, ge=1, le=64)
    #: A bearer token that may read /metrics without being an admin's API key (for a
    #: Prometheus scraper). Unset: only admins read /metrics.
    metrics_token: str | None = Field(None, min_length=16, max_length=512)
    #: Origins (`scheme://host[:port]`) of web pages that may call the gateway from a
    #: browser (CORS, preflight included), e.g. seed 002's front end on
    #: `http://localhost:3000`. Empty: no cross-origin page may read an answer.
    cors_origins: list[str] = Field([], max_length=100)

    @field_validator("cors_origins")
    @classmethod
    def _check_origins(cls, value: list[str]) -> list[str]:
        return [check_origin(origin) for origin in value]

    @field_serializer("metrics_token", when_used="json")
    def _mask_token(self, value: str | None) -> str | None:
        return None if value is None else "********"


def check_origin(origin: str) -> str:
    """An origin as a browser sends it in `Origin`: `http` or `https`, a host, an optional
    port, nothing else. `*` is refused: every origin would be let in, and a keyless
    loopback user (`compat.desktop_user`, `compat.lifehub_user`) must know which pages
    may act for it."""
    if origin == "*":
        raise ValueError('"*" is not accepted: list each origin, e.g. "http://localhost:3000"')
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        raise ValueError(f"{origin!r} is not an origin such as http://localhost:3000") from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.path
        or parts.query
        or parts.fragment
        or origin.endswith((":", "?", "#"))
    ):
        raise ValueError(
            f"{origin!r} is not an origin: scheme://host[:port] with http or https, no path"
            " (not even a trailing /), e.g. http://localhost:3000"
        )
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    # As a browser writes it: lower case, no default port.
    default = {"http": 80, "https": 443}[parts.scheme]
    shown = "" if port is None or port == default else f":{port}"
    return f"{parts.scheme}://{host}{shown}"
