"""A WebDAV folder over httpx: PUT a file (MKCOL for the folders it needs), DELETE one.

Three methods of RFC 4918 are all the copier needs, so this is a few lines on the HTTP
client the gateway already has rather than a WebDAV library (the maintained ones are
synchronous, or wrap a whole filesystem abstraction). Tested against wsgidav; written for
Nextcloud's `remote.php/dav/files/<user>/…` (Sabre), which answers the same way.

Every failure is a `WebDavError` with a fixed text that names at most a status code: the
text reaches the artifact's owner (`GET /v1/artifacts/{id}/meta`) and the log, and a
server's body or an exception's text could carry a URL with its credentials or another
user's path. `retry` says whether trying again later can help (a refused connection, a
timeout, a 5xx, 423 Locked, 429, 507 Insufficient Storage) or not (refused credentials,
a 4xx).
"""

from __future__ import annotations

from urllib.parse import quote

import httpx

#: Statuses worth another try later.
_TRANSIENT = frozenset({408, 423, 425, 429, 507})


class WebDavError(Exception):
    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry


class WebDavFolder:
    """One folder (`base_url`, ending in `/`) and the paths under it (`a/b/c.png`,
    names not percent-encoded: this class encodes each one)."""

    def __init__(self, base_url: str, auth: tuple[str, str] | None, *, timeout: float) -> None:
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self.timeout = timeout
        self._client = httpx.AsyncClient(
            auth=httpx.BasicAuth(*auth) if auth is not None else None,
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,  # credentials go to the configured URL and nowhere else
            headers={"User-Agent": "sessiongate"},
        )
        #: Folders made or found in this process, so a new file in them is one PUT.
        self._folders: set[str] = set()

    def url(self, path: str) -> str:
        return self.base_url + "/".join(quote(name, safe="") for name in path.split("/"))

    async def put(self, path: str, data: bytes, media_type: str) -> None:
        parent = path.rpartition("/")[0]
        if parent not in self._folders:
            await self._make_folders(parent)
        status = await self._send("PUT", path, content=data, headers={"Content-Type": media_type})
        if status in (404, 409):  # a folder went away since we made it: make it again
            self._folders.clear()
            await self._make_folders(parent)
            status = await self._send(
                "PUT", path, content=data, headers={"Content-Type": media_type}
            )
        if status not in (200, 201, 204):
            raise _failure(status)

    async def delete(self, path: str) -> None:
        """Delete a file; one already gone is deleted too."""
        status = await self._send("DELETE", path)
        if status not in (200, 202, 204, 404, 410):
            raise _failure(status)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _make_folders(self, folder: str) -> None:
        """MKCOL the base folder and each folder down to `folder`; 405 means it exists."""
        names = folder.split("/") if folder else []
        for depth in range(len(names) + 1):
            prefix = "/".join(names[:depth])
            if prefix in self._folders:
                continue
            status = await self._send("MKCOL", prefix, folder=True)
            if status == 409 and not prefix:
                raise WebDavError(
                    "the folder that should hold artifacts.webdav_url's folder does not exist"
                    " on the WebDAV server (HTTP 409)",
                    retry=False,
                )
            if status not in (200, 201, 405):
                raise _failure(status)
            self._folders.add(prefix)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        folder: bool = False,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> int:
        url = self.url(path) if path else self.base_url
        if folder and not url.endswith("/"):
            url += "/"
        try:
            response = await self._client.request(method, url, content=content, headers=headers)
        except httpx.TimeoutException:
            raise WebDavError(
                f"the WebDAV server did not answer within {self.timeout:g} s", retry=True
            ) from None
        except httpx.HTTPError:
            raise WebDavError("the WebDAV server could not be reached", retry=True) from None
        return response.status_code


def _failure(status: int) -> WebDavError:
    if status == 401:
        return WebDavError("the WebDAV server refused the credentials (HTTP 401)", retry=False)
    if status == 403:
        return WebDavError("the WebDAV server refused access to the folder (HTTP 403)", retry=False)
    if status == 507:
        return WebDavError("the WebDAV server is out of space (HTTP 507)", retry=True)
    if 300 <= status < 400:
        return WebDavError(
            f"the WebDAV server answered HTTP {status} (a redirect): is artifacts.webdav_url"
            " the folder's WebDAV address?",
            retry=False,
        )
    return WebDavError(
        f"the WebDAV server answered HTTP {status}", retry=status >= 500 or status in _TRANSIENT
    )
