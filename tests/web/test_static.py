"""How the gateway serves the page: headers, content types, caching, compression, and
nothing outside the page's own files. No browser needed."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sessiongate.api.web import CONTENT_SECURITY_POLICY, WEB_DIR, load_assets
from tests.support.gateway import Gateway
from tests.web.browser import PacedModel, gateway


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    with gateway(tmp_path, PacedModel(lambda text: text)) as running:
        yield running


def test_page_and_assets_carry_the_security_headers(gw: Gateway) -> None:
    with httpx.Client(base_url=gw.url) as client:
        for path, kind in [
            ("/", "text/html"),
            ("/web/app.js", "text/javascript"),
            ("/web/app.css", "text/css"),
            ("/web/markdown.js", "text/javascript"),
        ]:
            answer = client.get(path)
            assert answer.status_code == 200, path
            assert answer.headers["content-type"].startswith(kind), path
            assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert "script-src 'self'" in CONTENT_SECURITY_POLICY
            assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["referrer-policy"] == "no-referrer"
            assert answer.headers["cache-control"] == "no-cache"
    # No key is needed for the files: they hold no data.
    assert 'id="api-key"' in httpx.get(gw.url + "/").text


def test_revalidation_answers_304_and_gzip_is_smaller(gw: Gateway) -> None:
    with httpx.Client(base_url=gw.url) as client:
        plain = client.get("/web/app.js", headers={"Accept-Encoding": "identity"})
        zipped = client.get("/web/app.js", headers={"Accept-Encoding": "gzip"})
        assert zipped.headers["content-encoding"] == "gzip"
        assert zipped.text == plain.text  # httpx decodes it: the same file
        assert int(zipped.headers["content-length"]) < len(plain.content) / 2
        assert zipped.headers["etag"] != plain.headers["etag"]
        again = client.get(
            "/web/app.js",
            headers={"If-None-Match": plain.headers["etag"], "Accept-Encoding": "identity"},
        )
        assert again.status_code == 304 and again.content == b""
        head = client.head("/", headers={"Accept-Encoding": "identity"})
        assert head.status_code == 200 and head.content == b""
        assert int(head.headers["content-length"]) == len(client.get("/").content)


@pytest.mark.parametrize(
    "path",
    [
        "/web/../pyproject.toml",
        "/web/%2e%2e/api/web.py",
        "/web/..%2fapi%2fweb.py",
        "/web/%2e%2e%2f%2e%2e%2fconfig.py",
        "/web//etc/passwd",
        "/web/",
        "/web/nope.js",
        "/web/app.js%00.html",
        "/web/APP.JS",
    ],
)
def test_nothing_outside_the_page_is_served(gw: Gateway, path: str) -> None:
    with httpx.Client(base_url=gw.url) as client:
        # A raw path: httpx would otherwise normalise the dots away before sending.
        request = client.build_request("GET", gw.url)
        request.url = request.url.copy_with(raw_path=path.encode())
        answer = client.send(request)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "not_found"
    assert "import" not in answer.text  # no file content leaked


def test_the_table_holds_only_page_files() -> None:
    names = set(load_assets(WEB_DIR))
    assert {"index.html", "app.js", "app.css", "markdown.js", "chat.js"} <= names
    assert all(Path(name).suffix in {".html", ".js", ".css", ".svg"} for name in names)


def test_no_inline_script_or_style_and_no_html_sinks() -> None:
    html = (WEB_DIR / "index.html").read_text()
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert 'src="/web/' in tag and 'type="module"' in tag
    assert "<style" not in html and " style=" not in html
    assert re.search(r"<[^>]*\son[a-z]+\s*=", html) is None  # no inline event handler
    for script in WEB_DIR.glob("*.js"):
        if script.name != "app.js":  # the entry; the others are fetched at once, not in turn
            assert f'<link rel="modulepreload" href="/web/{script.name}">' in html
        source = script.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in source, f"{script.name} uses {sink}"
