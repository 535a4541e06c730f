"""Configuration of the listening server (`[server]`): address, workers, the WebSocket
authentication deadline, the access log and the token a metrics scraper may use."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, field_serializer

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

    @field_serializer("metrics_token", when_used="json")
    def _mask_token(self, value: str | None) -> str | None:
        return None if value is None else "********"
