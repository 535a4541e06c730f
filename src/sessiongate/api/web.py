"""The web page (DESIGN.md §10): static files shipped in the package, served at `/` and
`/web/<name>`, behind a strict Content-Security-Policy.

The files hold no data and need no key: everything the page shows it fetches through the
public API with the user's own `Authorization: Bearer`."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.responses import Response

WEB_DIR = Path(__file__).resolve().parent.parent / "web"

# No inline script or style anywhere, so 'self' is all the page needs. Audio replies are
# fetched with the key and played from `blob:` URLs; nothing may frame the page.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "media-src 'self' blob:; connect-src 'self'; form-action 'none'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# The names are not fingerprinted, so a browser revalidates every load; the ETag turns
# that into a 304 without a body.
CACHE_CONTROL = "no-cache"


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes
    content_type: str
    etag: str


def load_assets(directory: Path) -> dict[str, Asset]:
    """Every servable file under `directory`, by its path relative to it. A request can
    only ever name one of these: nothing outside the table is reachable, whatever `..`,
    encoded slashes or symlinks it tries."""
    table: dict[str, Asset] = {}
    for path in sorted(directory.rglob("*")):
        content_type = CONTENT_TYPES.get(path.suffix)
        if content_type is None or not path.is_file():
            continue
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        # Compressed once here (mtime 0: the same bytes on every start), not per request.
        gzipped = gzip.compress(body, compresslevel=9, mtime=0)
        name = path.relative_to(directory).as_posix()
        table[name] = Asset(body, gzipped, content_type, etag)
    return table


@cache
def assets() -> dict[str, Asset]:
    return load_assets(WEB_DIR)


def not_modified(request: Request, etag: str) -> bool:
    presented = request.headers.get("if-none-match", "")
    return any(tag.strip() in (etag, "*") for tag in presented.split(","))


def accepts_gzip(request: Request) -> bool:
    return any(
        part.split(";")[0].strip() == "gzip"
        for part in request.headers.get("accept-encoding", "").split(",")
    )


def serve(request: Request, name: str) -> Response:
    asset = assets().get(name)
    if asset is None:
        return JSONResponse(
            {"error": {"code": "not_found", "message": "no such file in the web page"}},
            status_code=404,
            headers=SECURITY_HEADERS,
        )
    compressed = accepts_gzip(request)
    # Each encoding is its own representation, with its own validator.
    etag = asset.etag[:-1] + '-gz"' if compressed else asset.etag
    headers = {
        **SECURITY_HEADERS,
        "Cache-Control": CACHE_CONTROL,
        "ETag": etag,
        "Vary": "Accept-Encoding",
    }
    if not_modified(request, etag):
        return Response(status_code=304, headers=headers)
    body = asset.gzipped if compressed else asset.body
    if compressed:
        headers["Content-Encoding"] = "gzip"
    headers["Content-Length"] = str(len(body))
    if request.method == "HEAD":
        body = b""
    return Response(body, media_type=asset.content_type, headers=headers)


router = APIRouter(include_in_schema=False)


@router.api_route("/", methods=["GET", "HEAD"])
async def page(request: Request) -> Response:
    return serve(request, "index.html")


@router.api_route("/web/{name:path}", methods=["GET", "HEAD"])
async def web_file(request: Request, name: str) -> Response:
    return serve(request, name)
