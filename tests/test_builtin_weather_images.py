"""`weather_current` and `image_generate` against local servers speaking Open-Meteo's and
OpenAI's shapes (127.0.0.1 only), and `GET /v1/artifacts/{id}` over real HTTP."""

from __future__ import annotations

import base64
import json
import re
import stat
import struct
import threading
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from sessiongate.agents.builtin.images import image_tool, sniff_image
from sessiongate.agents.builtin.source import builtin_tool_source
from sessiongate.agents.builtin.weather import WeatherTool, weather_tool
from sessiongate.agents.tools import ToolContext, ToolFailed
from sessiongate.config import Settings
from sessiongate.config.tools import WeatherToolConfig
from sessiongate.core.keys import KeyRef
from sessiongate.errors import ConfigError
from sessiongate.service.artifacts import artifacts_folder
from sessiongate.service.engine import Engine, build_engine
from tests.support.agent_models import Call, ToolModel
from tests.support.fake_providers import closed_port
from tests.support.gateway import gateway_settings, parse_sse, running_gateway

CONTEXT = ToolContext("alice", False, KeyRef("alice", "chat:alice"), "main", "turn-1")
PLACES = {
    "Berlin": {
        "id": 2950159,
        "name": "Berlin",
        "latitude": 52.52437,
        "longitude": 13.41053,
        "country": "Germany",
        "admin1": "Land Berlin",
        "timezone": "Europe/Berlin",
    }
}
KEY_ENV = "SG_TEST_IMAGES_KEY"


def tiny_png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG: signature, IHDR, one IDAT of red RGB pixels, IEND."""

    def chunk(kind: bytes, payload: bytes) -> bytes:
        crc = zlib.crc32(kind + payload) & 0xFFFFFFFF
        return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = tiny_png()


@dataclass
class Upstream:
    """What the fake servers saw and how they should behave."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0  # seconds to wait before answering anything
    status: int = 200
    image: bytes = PNG
    released: threading.Event = field(default_factory=threading.Event)


def _handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _answer(self, status: int, body: Any) -> None:
            raw = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (a timeout test): nothing to answer

        def _seen(self, body: Any = None) -> tuple[str, dict[str, str]]:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            upstream.requests.append(
                {
                    "method": self.command,
                    "path": parts.path,
                    "query": query,
                    "body": body,
                    "authorization": self.headers.get("Authorization"),
                }
            )
            if upstream.delay:
                upstream.released.wait(upstream.delay)
            return parts.path, query

        def do_GET(self) -> None:
            path, query = self._seen()
            if upstream.status != 200:
                self._answer(upstream.status, {"error": True, "reason": "SECRET upstream text"})
            elif path == "/v1/search":
                place = PLACES.get(query.get("name", ""))
                self._answer(200, {"results": [place], "generationtime_ms": 0.4} if place else {})
            elif path == "/v1/forecast":
                self._answer(200, forecast(float(query["latitude"]), float(query["longitude"])))
            else:
                self._answer(404, {"error": True, "reason": "no such path"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            path, _ = self._seen(body)
            if upstream.status != 200:
                self._answer(upstream.status, {"error": {"message": "SECRET upstream text"}})
            elif path == "/v1/images/generations":
                encoded = base64.b64encode(upstream.image).decode()
                self._answer(200, {"created": 1, "data": [{"b64_json": encoded}]})
            else:
                self._answer(404, {"error": {"message": "no such path"}})

    return Handler


def forecast(latitude: float, longitude: float) -> dict[str, Any]:
    return {
        "latitude": latitude,
        "longitude": longitude,
        "timezone": "Europe/Berlin",
        "current_units": {
            "time": "iso8601",
            "temperature_2m": "°C",
            "relative_humidity_2m": "%",
            "wind_speed_10m": "km/h",
            "weather_code": "wmo code",
        },
        "current": {
            "time": "2026-03-02T10:00",
            "interval": 900,
            "temperature_2m": 7.4,
            "relative_humidity_2m": 81,
            "wind_speed_10m": 14.2,
            "weather_code": 3,
        },
    }


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    state = Upstream()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    state.released.set()  # a slow answer still waiting ends now
    server.shutdown()
    server.server_close()


def weather(upstream_url: str, timeout: str = "5s") -> WeatherTool:
    config = WeatherToolConfig(base_url=upstream_url, geocoding_url=upstream_url, timeout=timeout)
    return WeatherTool(config)


# --- weather_current ---------------------------------------------------------------------


async def test_weather_by_place_name_geocodes_then_reads_the_forecast(upstream: Upstream) -> None:
    output = await weather(upstream.url)({"location": "Berlin"}, CONTEXT)
    assert not output.is_error
    assert "Berlin" in output.content and "Germany" in output.content
    assert "7.4 °C" in output.content and "overcast" in output.content
    assert "81 %" in output.content and "14.2 km/h" in output.content
    assert output.data["temperature"] == 7.4
    assert output.data["relative_humidity"] == 81
    assert output.data["wind_speed"] == 14.2
    assert output.data["weather_code"] == 3
    assert output.data["latitude"] == pytest.approx(52.52437)

    search, forecast_request = upstream.requests
    assert search["path"] == "/v1/search"
    assert search["query"]["name"] == "Berlin" and search["query"]["count"] == "1"
    assert forecast_request["path"] == "/v1/forecast"
    assert float(forecast_request["query"]["latitude"]) == pytest.approx(52.5244, abs=1e-4)
    assert float(forecast_request["query"]["longitude"]) == pytest.approx(13.4105, abs=1e-4)
    current = forecast_request["query"]["current"].split(",")
    assert set(current) == {
        "temperature_2m",
        "relative_humidity_2m",
        "wind_speed_10m",
        "weather_code",
    }


async def test_weather_by_coordinates_skips_the_geocoder(upstream: Upstream) -> None:
    output = await weather(upstream.url)({"latitude": 48.8566, "longitude": 2.3522}, CONTEXT)
    assert [r["path"] for r in upstream.requests] == ["/v1/forecast"]
    assert upstream.requests[0]["query"]["latitude"] == "48.8566"
    assert output.data["location"] is None
    assert "48.8566, 2.3522" in output.content and "7.4 °C" in output.content


async def test_an_unknown_place_is_a_tool_failure_naming_it(upstream: Upstream) -> None:
    with pytest.raises(ToolFailed) as raised:
        await weather(upstream.url)({"location": "Nowhereville"}, CONTEXT)
    assert raised.value.message == "no place named 'Nowhereville'"
    assert [r["path"] for r in upstream.requests] == ["/v1/search"]


@pytest.mark.parametrize(
    "arguments",
    [{}, {"latitude": 1.0}, {"location": "Berlin", "latitude": 1.0, "longitude": 2.0}],
)
async def test_a_place_must_be_named_exactly_one_way(
    upstream: Upstream, arguments: dict[str, Any]
) -> None:
    with pytest.raises(ToolFailed) as raised:
        await weather(upstream.url)(arguments, CONTEXT)
    assert raised.value.message.startswith("invalid arguments:")
    assert upstream.requests == []


async def test_an_upstream_error_status_never_passes_on_its_body(upstream: Upstream) -> None:
    upstream.status = 502
    with pytest.raises(ToolFailed) as raised:
        await weather(upstream.url)({"location": "Berlin"}, CONTEXT)
    assert raised.value.message == "the weather service answered HTTP 502"
    assert "SECRET" not in raised.value.message


async def test_an_upstream_that_is_down_fails_fast() -> None:
    down = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(ToolFailed) as raised:
        await weather(down)({"latitude": 1.0, "longitude": 2.0}, CONTEXT)
    assert raised.value.message == "the weather service could not be reached"
    assert time.monotonic() - started < 2


async def test_a_slow_upstream_fails_within_the_timeout(upstream: Upstream) -> None:
    upstream.delay = 30
    started = time.monotonic()
    with pytest.raises(ToolFailed) as raised:
        await weather(upstream.url, timeout="500ms")({"location": "Berlin"}, CONTEXT)
    elapsed = time.monotonic() - started
    assert raised.value.message == "the weather service did not answer within 0.5 s"
    assert 0.4 < elapsed < 2.5


def test_the_weather_schema_is_what_the_model_sees() -> None:
    spec = weather_tool(WeatherToolConfig()).spec
    assert spec.name == "weather_current"
    assert set(spec.parameters["properties"]) == {"location", "latitude", "longitude"}
    assert spec.parameters["additionalProperties"] is False
    assert "title" not in spec.parameters["properties"]["location"]


# --- image_generate ----------------------------------------------------------------------


def image_settings(tmp_path: Path, upstream_url: str, **overrides: Any) -> Settings:
    return gateway_settings(
        tmp_path,
        agents={"main": {"model": "toolmodel", "tools": ["image_generate", "weather_current"]}},
        models={
            "painter": {
                "provider": "openai",
                "base_url": f"{upstream_url}/v1",
                "model": "gpt-image-1",
                "api_key_env": KEY_ENV,
            },
            "chat": {"provider": "offline"},
        },
        tools={
            "images": {"model": "painter", "size": "256x256", "timeout": "5s"},
            "weather": {"base_url": upstream_url, "geocoding_url": upstream_url},
        },
        **overrides,
    )


def test_sniffing_knows_png_jpeg_and_webp_only() -> None:
    assert sniff_image(PNG) == "image/png"
    assert sniff_image(b"\xff\xd8\xff\xe0rest") == "image/jpeg"
    assert sniff_image(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff_image(b"<svg onload=alert(1)>") is None
    assert sniff_image(b"GIF89a") is None


def test_image_generate_is_offered_only_for_an_openai_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    unset = gateway_settings(tmp_path)
    assert image_tool(unset, None) is None  # type: ignore[arg-type]
    wrong = image_settings(tmp_path, "http://127.0.0.1:9").model_copy(deep=True)
    wrong.tools.images.model = "chat"
    with pytest.raises(ConfigError, match=re.escape("tools.images.model")):
        image_tool(wrong, None)  # type: ignore[arg-type]
    missing = image_settings(tmp_path, "http://127.0.0.1:9").model_copy(deep=True)
    missing.tools.images.model = "nobody"
    with pytest.raises(ConfigError, match="'nobody'"):
        image_tool(missing, None)  # type: ignore[arg-type]


async def test_the_builtin_source_offers_weather_always_and_images_when_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    without = builtin_tool_source(gateway_settings(tmp_path), None)  # type: ignore[arg-type]
    assert [t.spec.name for t in await without.tools()] == ["weather_current"]
    with_images = builtin_tool_source(
        image_settings(tmp_path, "http://127.0.0.1:9"),
        None,  # type: ignore[arg-type]
    )
    assert [t.spec.name for t in await with_images.tools()] == [
        "weather_current",
        "image_generate",
    ]
    assert with_images.name == "builtin-web"
    assert {t.source for t in await with_images.tools()} == {"builtin"}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_image_generate_end_to_end_through_a_turn_and_the_artifact_route(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-images-secret")
    model = ToolModel([Call("image_generate", {"prompt": "a red square"}, "i1")], "Here it is.")
    settings = image_settings(tmp_path, upstream.url)
    with running_gateway(settings, {"toolmodel": model}) as gateway:
        answer = httpx.post(
            f"{gateway.url}/v1/sessions/chat:alice/messages",
            json={"content": "draw a red square"},
            headers=gateway.auth("alice"),
            timeout=20,
        )
        assert answer.status_code == 200
        events = parse_sse(answer.text)
        ends = [data for kind, data in events if kind == "tool_end"]
        assert len(ends) == 1 and ends[0]["status"] == "ok", ends
        assert ends[0]["name"] == "image_generate"
        assert "/v1/artifacts/" in ends[0]["output"]
        artifact_id = ends[0]["output"].split("/v1/artifacts/")[1].split(" ")[0]
        # The model read the same link in the tool result.
        assert f"/v1/artifacts/{artifact_id}" in model.requests[1].messages[-1]["content"]

        # The upstream got OpenAI's request, with the key from the environment.
        (generation,) = upstream.requests
        assert generation["path"] == "/v1/images/generations"
        assert generation["body"]["response_format"] == "b64_json"
        assert generation["body"]["prompt"] == "a red square"
        assert generation["body"]["model"] == "gpt-image-1"
        assert generation["body"]["size"] == "256x256"
        assert generation["authorization"] == "Bearer sk-images-secret"

        url = f"{gateway.url}/v1/artifacts/{artifact_id}"
        got = httpx.get(url, headers=gateway.auth("alice"))
        assert got.status_code == 200
        assert got.content == PNG
        assert got.headers["content-type"] == "image/png"
        assert got.headers["content-disposition"].startswith("inline")
        assert got.headers["x-content-type-options"] == "nosniff"
        assert got.headers["content-security-policy"].startswith("default-src 'none'")

        # The tool message keeps the artifact id in its metadata.
        messages = httpx.get(
            f"{gateway.url}/v1/sessions/chat:alice", headers=gateway.auth("alice")
        ).json()
        session_id = messages["latest"]["session_id"]
        stored = httpx.get(
            f"{gateway.url}/v1/sessions/chat:alice/segments/{session_id}/messages",
            headers=gateway.auth("alice"),
        ).json()["messages"]
        tool_messages = [m for m in stored if m["role"] == "tool"]
        assert tool_messages[0]["metadata"]["artifact_ids"] == [artifact_id]

        # Nobody else sees it, and nobody learns it exists.
        other = httpx.get(url, headers=gateway.auth("bob"))
        assert other.status_code == 404
        assert other.json()["error"]["code"] == "artifact_not_found"
        assert "image" not in other.text
        assert httpx.get(url).status_code == 401
        bad = httpx.get(f"{gateway.url}/v1/artifacts/not-an-id", headers=gateway.auth("alice"))
        assert bad.status_code == 400
        assert bad.json()["error"]["code"] == "invalid_artifact_id"
        # An admin may read it by naming the owner; a non-admin may not name one.
        admin = httpx.get(url, params={"owner": "alice"}, headers=gateway.auth("root"))
        assert admin.status_code == 200 and admin.content == PNG
        assert httpx.get(url, headers=gateway.auth("root")).status_code == 404
        snoop = httpx.get(url, params={"owner": "alice"}, headers=gateway.auth("bob"))
        assert snoop.status_code == 403

        # On disk: owner-only.
        root = artifacts_folder(settings)
        (file,) = [p for p in root.rglob("*") if p.is_file()]
        assert file.name == artifact_id
        assert mode(file) == 0o600 and mode(file.parent) == 0o700 and mode(root) == 0o700

        # Erasing the key erases the image: its row, its file, its URL.
        erased = httpx.delete(
            f"{gateway.url}/v1/sessions/chat:alice", headers=gateway.auth("alice")
        )
        assert erased.status_code == 204
        assert not file.exists()
        assert httpx.get(url, headers=gateway.auth("alice")).status_code == 404


@pytest.fixture
async def image_engine(
    tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    engine = build_engine(image_settings(tmp_path, upstream.url), models={"toolmodel": ToolModel()})
    yield engine
    await engine.aclose()


async def test_image_failures_are_tool_failures(
    tmp_path: Path, upstream: Upstream, image_engine: Engine
) -> None:
    tool = image_tool(image_engine.settings, image_engine.artifacts)  # type: ignore[arg-type]
    assert tool is not None

    upstream.status = 500
    with pytest.raises(ToolFailed) as raised:
        await tool.call({"prompt": "x"}, CONTEXT)
    assert raised.value.message == "the image service answered HTTP 500"

    upstream.status = 200
    upstream.image = b"<html><script>alert(1)</script></html>"
    with pytest.raises(ToolFailed, match="not an image"):
        await tool.call({"prompt": "x"}, CONTEXT)
    assert not artifacts_folder(image_engine.settings).exists()  # nothing was kept

    upstream.image = b"\x89PNG\r\n\x1a\n" + b"\x00" * 2048
    assert image_engine.artifacts is not None
    image_engine.artifacts.max_bytes = 1024
    with pytest.raises(ToolFailed, match=r"could not be kept: .*max_artifact_bytes"):
        await tool.call({"prompt": "x"}, CONTEXT)

    down = image_settings(tmp_path, f"http://127.0.0.1:{closed_port()}")
    down_tool = image_tool(down, image_engine.artifacts)
    assert down_tool is not None
    with pytest.raises(ToolFailed, match="could not be reached"):
        await down_tool.call({"prompt": "x"}, CONTEXT)


async def test_a_slow_image_service_fails_within_the_timeout(
    upstream: Upstream, image_engine: Engine
) -> None:
    upstream.delay = 30
    settings = image_engine.settings.model_copy(deep=True)
    settings.tools.images.timeout = timedelta(milliseconds=500)
    tool = image_tool(settings, image_engine.artifacts)  # type: ignore[arg-type]
    assert tool is not None
    started = time.monotonic()
    with pytest.raises(ToolFailed, match=re.escape("did not answer within 0.5 s")):
        await tool.call({"prompt": "x"}, CONTEXT)
    assert time.monotonic() - started < 2.5
