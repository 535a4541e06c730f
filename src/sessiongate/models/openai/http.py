"""The `openai` provider's one upstream call, `POST {base_url}/chat/completions` with a
streamed body, sent with aiohttp directly rather than through the official SDK.

Why not the SDK: its request layer (request options, header merging, an httpx2 request
and response wrapped around the aiohttp transport it runs on: two HTTP stacks per call)
cost about 1.2 ms of CPU per upstream call on the bench machine, more than half of the
gateway's own cost per turn (bench/gateway_load.py, issue 24). This module sends what the
SDK sent (the bearer key, JSON content type, the organisation and project headers the SDK
reads from the environment), with the SDK's defaults for what the gateway left to it: the
base URL from `OPENAI_BASE_URL` or OpenAI's, proxies from the environment, redirects
followed, the connect timeout for opening a connection and the read timeout for every
wait on the socket (the head, and each piece of the body), no limit on the whole call.

The caller reads the body; what this module tells apart is where a failure happened, since
that decides how it is classified (models/openai/adapter.py):

* `NoAnswer`: the request got no answer's head (nothing listening, a reset, a connect or
  head timeout, a refused URL), the cause chained;
* `StatusError`: a status other than 2xx, its body read and decoded as the SDK did (JSON
  when it parses, else the text);
* anything raised while the body streams arrives unwrapped (aiohttp's own errors).

One `ClientSession` per adapter, made on first use in the running event loop (a session
is bound to its loop), with the SDK's pool: up to 1,000 connections, idle ones kept 5 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

#: The SDK's default when neither the configuration nor `OPENAI_BASE_URL` names a server.
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The SDK's pool: connections at most, and how long an idle one is kept.
_POOL_LIMIT = 1000
_KEEPALIVE_S = 5.0
#: After `[DONE]`, how long to wait for the body's own end, so the connection goes back to
#: the pool instead of being closed (a body not read to its end cannot be reused).
_DRAIN_S = 0.5


class NoAnswer(Exception):
    """The request failed before the response's head arrived; the cause is chained."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class StatusError(Exception):
    """A response with a status other than 2xx; `body` is its decoded JSON, else its text."""

    def __init__(self, status: int, headers: Mapping[str, str], body: object) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.headers = headers
        self.body = body


def _user_agent() -> str:
    try:
        return f"sessiongate/{version('sessiongate')}"
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "sessiongate"


def _env_proxy(url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for `url` (`HTTPS_PROXY`, `HTTP_PROXY`, minus
    `NO_PROXY`), as the SDK's HTTP client honoured them; read once, not per request."""
    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None


class ChatCompletionsClient:
    """Sends chat-completions requests to one server; `aclose` ends its connections."""

    def __init__(
        self, *, base_url: str | None, api_key: str, connect_timeout: float, read_timeout: float
    ) -> None:
        base = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.url = base.rstrip("/") + "/chat/completions"
        headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": _user_agent(),
        }
        # The SDK reads these two from the environment when the client names neither.
        for header, variable in (
            ("OpenAI-Organization", "OPENAI_ORG_ID"),
            ("OpenAI-Project", "OPENAI_PROJECT_ID"),
        ):
            if value := os.environ.get(variable):
                headers[header] = value
        self._headers = headers
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=read_timeout, sock_connect=connect_timeout, sock_read=read_timeout
        )
        self._proxy, self._proxy_auth = _env_proxy(self.url)
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            tls: ssl.SSLContext | bool = True
            if self.url.startswith("https:"):
                # The trust store the SDK's client used (SSL_CERT_FILE and SSL_CERT_DIR
                # honoured), not only the system's.
                import httpx2

                tls = httpx2.create_ssl_context(trust_env=True)
            connector = aiohttp.TCPConnector(
                limit=_POOL_LIMIT, keepalive_timeout=_KEEPALIVE_S, ssl=tls
            )
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
            self._loop = loop
        return self._session

    async def open(self, body: bytes) -> aiohttp.ClientResponse:
        """The response to `body` (a JSON request) with its body unread, status 2xx; raises
        `NoAnswer` or `StatusError`. The caller closes it with `finish` or `abandon`."""
        try:
            response = await self._session_here().post(
                self.url,
                data=body,
                headers=self._headers,
                proxy=self._proxy,
                proxy_auth=self._proxy_auth,
            )
        except Exception as exc:
            raise NoAnswer(exc) from exc
        if 200 <= response.status < 300:
            return response
        try:
            raw = await response.read()
        finally:
            response.release()
        text = raw.decode("utf-8", "replace").strip()
        body_seen: object = text
        with contextlib.suppress(orjson.JSONDecodeError):
            body_seen = orjson.loads(text)
        raise StatusError(response.status, response.headers, body_seen)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


async def finish(response: aiohttp.ClientResponse) -> None:
    """After the stream's end marker: wait briefly for the body's own end, then hand the
    connection back to the pool (closed instead if the body does not end in time)."""
    content = response.content
    if not content.is_eof():
        try:
            async with asyncio.timeout(_DRAIN_S):
                while await content.readany():
                    pass
        except (TimeoutError, aiohttp.ClientError, OSError):
            response.close()
            return
    response.release()


def abandon(response: aiohttp.ClientResponse) -> None:
    """A response not read to its end: its connection is closed, never reused."""
    response.close()
