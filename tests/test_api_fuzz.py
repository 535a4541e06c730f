"""Fuzz the JSON API from its own OpenAPI document: no input may produce a 5xx.

Schemathesis generates the requests (valid and invalid bodies, paths and query strings
from the schema); the app is called in-process through ASGI with a real API key.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiongate.api.app import create_app
from sessiongate.service.engine import build_engine
from tests.support.gateway import gateway_settings
from tests.support.helpers import ScriptedModel


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    path: Path = tmp_path_factory.mktemp("fuzz")
    engine = build_engine(gateway_settings(path), models={"scripted": ScriptedModel()})
    _, token = asyncio.run(engine.users.add("alice"))
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(engine, close_engine=False))
    return schema, token


def test_the_schema_covers_the_contract(api: tuple[Any, str]) -> None:
    schema, _ = api
    paths = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    assert ("POST", "/v1/sessions/{key}/messages") in paths
    assert ("POST", "/v1/chat/completions") in paths
    assert len(paths) >= 18


def test_no_input_produces_a_server_error(api: tuple[Any, str]) -> None:
    schema, token = api
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        strategy = operation.as_strategy() | operation.as_strategy(
            generation_mode=schemathesis.GenerationMode.NEGATIVE
        )

        @given(case=strategy)
        @settings(
            max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case: schemathesis.Case[Any]) -> None:
            case.headers["Authorization"] = f"Bearer {token}"
            response = case.call()
            if response.status_code >= 500:
                failures.append(
                    f"{case.method} {case.formatted_path}: "
                    f"{response.status_code} {response.text[:200]}"
                )
            elif response.status_code >= 400:
                body = response.json()
                assert body["error"]["code"], body
                assert body["error"]["message"], body

        check()
    assert failures == []


@given(st.binary(max_size=300))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_arbitrary_bytes_as_a_message_body(api: tuple[Any, str], body: bytes) -> None:
    from starlette.testclient import TestClient

    schema, token = api
    with TestClient(schema.app, raise_server_exceptions=False) as client:
        response = client.post(
            "/v1/sessions/fuzz:bytes/messages",
            content=body,
            headers={"Authorization": f"Bearer {token}", "content-type": "application/json"},
        )
    assert response.status_code < 500, response.text
