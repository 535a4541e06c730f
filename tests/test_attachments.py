"""Images sent with a turn: checked before anything runs, kept as artifacts of the key,
sent to vision models as image parts (meta as text) and to the others as a note."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.models.base import ModelCapabilities, ReplyModel
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
    b"\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
)
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 60


class VisionModel(ScriptedModel):
    capabilities = ModelCapabilities(images=True)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Gateway, VisionModel, ScriptedModel]]:
    vision = VisionModel("vision")
    text = ScriptedModel("scripted")
    settings = gateway_settings(
        tmp_path,
        # Every test user may name both agents (core/agent_access.py).
        agents={
            "defaults": {"model": "scripted", "users": ["*"]},
            "main": {},
            "eyes": {"model": "vision"},
        },
        limits={
            "max_body_bytes": 65536,
            "max_content_chars": 20000,
            "max_attachments": 2,
            "max_attachment_bytes": 4096,
        },
    )
    models: dict[str, ReplyModel] = {"vision": vision, "scripted": text}
    with running_gateway(settings, models) as gw:
        yield gw, vision, text


def image(data: bytes = PNG, media_type: str = "image/png", **meta: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": "image",
        "media_type": media_type,
        "data": base64.b64encode(data).decode(),
    }
    if meta:
        body["meta"] = meta
    return body


def turn(gw: Gateway, user: str = "alice", **body: Any) -> httpx.Response:
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        return client.post(
            "/v1/sessions/shots/messages",
            json={"content": "what is on screen", "stream": False, **body},
            headers=gw.auth(user),
        )


def test_a_vision_model_gets_the_image_and_its_meta(
    setup: tuple[Gateway, VisionModel, ScriptedModel],
) -> None:
    gw, vision, _ = setup
    answer = turn(gw, agent="eyes", attachments=[image(width=1920, height=1080, grid=8, scale=2)])
    assert answer.status_code == 200, answer.text
    content: Any = vision.requests[-1][-1]["content"]
    assert content[0] == {"type": "text", "text": "what is on screen"}
    assert '"height": 1080' in content[1]["text"] and '"grid": 8' in content[1]["text"]
    assert content[2]["type"] == "image" and base64.b64decode(content[2]["data"]) == PNG


def test_a_model_without_vision_is_told_an_image_was_left_out(
    setup: tuple[Gateway, VisionModel, ScriptedModel],
) -> None:
    gw, _, text = setup
    assert turn(gw, attachments=[image(JPEG, "image/jpeg")]).status_code == 200
    content: Any = text.requests[-1][-1]["content"]
    assert all(part["type"] == "text" for part in content)
    assert "cannot see images" in content[1]["text"]


def test_the_image_is_kept_as_an_artifact_only_its_owner_reads(
    setup: tuple[Gateway, VisionModel, ScriptedModel],
) -> None:
    gw, _, _ = setup
    answer = turn(gw, agent="eyes", attachments=[image()])
    assert answer.status_code == 200
    segment = answer.json()["session_id"]
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        page = client.get(
            f"/v1/sessions/shots/segments/{segment}/messages", headers=gw.auth("alice")
        ).json()
        user = next(m for m in page["messages"] if m["role"] == "user")
        artifact = user["metadata"]["attachments"][0]["artifact_id"]
        mine = client.get(f"/v1/artifacts/{artifact}", headers=gw.auth("alice"))
        theirs = client.get(f"/v1/artifacts/{artifact}", headers=gw.auth("bob"))
        # Erasing the key erases its images.
        assert client.delete("/v1/sessions/shots", headers=gw.auth("alice")).status_code == 204
        gone = client.get(f"/v1/artifacts/{artifact}", headers=gw.auth("alice"))
    assert mine.status_code == 200 and mine.content == PNG
    assert mine.headers["content-type"] == "image/png"
    assert theirs.status_code == 404
    assert gone.status_code == 404


@pytest.mark.parametrize(
    ("attachments", "status", "code"),
    [
        ([image(), image(), image()], 400, "too_many_attachments"),
        ([image(b"\x00" * 5000)], 413, "attachment_too_large"),
        ([{**image(), "data": "!!!not base64!!!"}], 400, "invalid_attachment"),
        ([image(b"GIF89a" + b"\x00" * 10, "image/png")], 400, "invalid_attachment"),
        ([image(media_type="image/svg+xml")], 400, "invalid_attachment"),
        ([image(b"")], 400, "invalid_attachment"),
        ([{**image(), "type": "audio"}], 400, None),
        ([{**image(), "extra": 1}], 400, None),
        ([image(width=-1)], 400, None),
        ([image(grid="x" * 65)], 400, None),
        ([image(scale=1e308)], 400, None),
    ],
)
def test_hostile_attachments_get_a_clear_4xx_before_anything_runs(
    setup: tuple[Gateway, VisionModel, ScriptedModel],
    attachments: list[dict[str, Any]],
    status: int,
    code: str | None,
) -> None:
    gw, vision, _ = setup
    answer = turn(gw, agent="eyes", attachments=attachments)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == (code or error["code"]) and error["message"]
    assert vision.requests == []  # nothing ran
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        listed = client.get("/v1/sessions", headers=gw.auth("alice"))
    assert "shots" not in listed.text  # not even the key was created


def test_a_keys_artifacts_are_listed_by_turn_and_type_to_their_owner_only(
    setup: tuple[Gateway, VisionModel, ScriptedModel],
) -> None:
    gw, _, _ = setup
    first = turn(gw, agent="eyes", attachments=[image()]).json()["turn_id"]
    second = turn(gw, agent="eyes", attachments=[image(JPEG, "image/jpeg")]).json()["turn_id"]
    with httpx.Client(base_url=gw.url, timeout=30, headers=gw.auth("alice")) as client:
        every = client.get("/v1/artifacts", params={"key": "shots"}).json()["artifacts"]
        by_turn = client.get("/v1/artifacts", params={"key": "shots", "turn_id": first}).json()
        jpegs = client.get("/v1/artifacts", params={"key": "shots", "media_type": "image/jpeg"})
        one = client.get("/v1/artifacts", params={"key": "shots", "limit": 1}).json()
        theirs = client.get("/v1/artifacts", params={"key": "shots"}, headers=gw.auth("bob"))
        bad_params: dict[str, dict[str, Any]] = {
            "no key": {},
            "bad key": {"key": "a b\x00"},
            "bad turn": {"key": "shots", "turn_id": "../etc"},
            "bad type": {"key": "shots", "media_type": "<script>"},
            "zero limit": {"key": "shots", "limit": 0},
            "huge limit": {"key": "shots", "limit": 10**30},
        }
        bad = {
            name: client.get("/v1/artifacts", params=params) for name, params in bad_params.items()
        }
        fetched = client.get(every[0]["url"])
    # Newest first, each with where it came from.
    assert [a["turn_id"] for a in every] == [second, first]
    assert {a["key"] for a in every} == {"shots"}
    assert [a["media_type"] for a in by_turn["artifacts"]] == ["image/png"]
    assert [a["turn_id"] for a in jpegs.json()["artifacts"]] == [second]
    assert len(one["artifacts"]) == 1
    assert fetched.status_code == 200 and fetched.content == JPEG
    # Bob's "shots" is his own (empty) key: alice's artifacts are never listed to him.
    assert theirs.status_code == 200 and theirs.json() == {"artifacts": []}
    for name, response in bad.items():
        assert response.status_code == 400, (name, response.text)
        assert response.json()["error"]["code"], name
