"""Tasks: the service on SQLite and on PostgreSQL (owner-only, hostile input, paging,
updates that never lose a field, erasure), `/v1/tasks` through the real app, the
`tasks_*` tools through the registry, and one agent turn that adds a task."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.agents.tools import ToolContext
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from sessiongate.core.tasks import MAX_PAGE, MAX_TITLE_CHARS
from sessiongate.core.users import Caller
from sessiongate.errors import NotFound, SessionGateError
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.tasks import TaskService
from sessiongate.store.tasks import Task
from tests.conftest import BACKENDS, START, make_settings
from tests.support.agent_models import Call, ToolModel
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import collect

ALICE_CONTEXT = ToolContext("alice", False, KeyRef("alice", "chat:alice"), "main", "turn-1")
BOB_CONTEXT = ToolContext("bob", False, KeyRef("bob", "chat:bob"), "main", "turn-2")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # conftest.py runs only the modules it lists on both stores; this one always does.
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


def tasks_of(engine: Engine) -> TaskService:
    assert engine.tasks is not None
    return engine.tasks


def other_id(task_id: str) -> str:
    """An id of the same shape that was never issued."""
    return task_id[:-4] + ("0000" if task_id[-4:] != "0000" else "1111")


async def refused(call: Any) -> tuple[str, int]:
    with pytest.raises(SessionGateError) as raised:
        await call
    return raised.value.code, raised.value.status


# -- the service, on both stores ----------------------------------------------------------


async def test_a_task_round_trips_every_column(engine: Engine) -> None:
    tasks = tasks_of(engine)
    added = await tasks.add(
        "alice",
        "  Renew the passport  ",
        due="2026-05-01",
        source_key="chat:alice",
        source_turn_id="turn-1",
    )
    assert added.title == "Renew the passport"  # surrounding spaces go
    assert (added.owner, added.status, added.due) == ("alice", "open", date(2026, 5, 1))
    assert (added.source_key, added.source_turn_id) == ("chat:alice", "turn-1")
    assert added.created_at == added.updated_at == START
    assert added.completed_at is None
    assert await tasks.get("alice", added.task_id) == added  # through the store and back
    plain = await tasks.add("alice", "No date, no turn")
    assert (plain.due, plain.source_key, plain.source_turn_id) == (None, None, None)
    assert await tasks.get("alice", plain.task_id) == plain


async def test_listing_filters_by_status_and_pages_in_creation_order(
    engine: Engine, clock: ManualClock
) -> None:
    tasks = tasks_of(engine)
    made = []
    for n in range(7):
        made.append(await tasks.add("alice", f"task {n}"))
        clock.advance(timedelta(seconds=1))
    ids = [t.task_id for t in made]
    assert ids == sorted(ids)
    await tasks.complete("alice", ids[1])
    await tasks.complete("alice", ids[4])
    await tasks.add("bob", "not alice's")

    assert [t.task_id for t in await tasks.list_tasks("alice", "done")] == [ids[1], ids[4]]
    open_ids = [t.task_id for t in await tasks.list_tasks("alice", "open")]
    assert open_ids == [ids[0], ids[2], ids[3], ids[5], ids[6]]
    assert [t.task_id for t in await tasks.list_tasks("alice")] == ids

    seen: list[str] = []
    after: str | None = None
    while True:
        page = await tasks.list_tasks("alice", "open", limit=2, after=after)
        assert len(page) <= 2
        seen += [t.task_id for t in page]
        if len(page) < 2:
            break
        after = page[-1].task_id
    assert seen == open_ids
    assert await tasks.list_tasks("carol") == []


async def test_updates_change_only_what_they_name(engine: Engine, clock: ManualClock) -> None:
    tasks = tasks_of(engine)
    task = await tasks.add("alice", "Water the plants", due="2026-03-10", source_key="k")
    clock.advance(timedelta(minutes=1))
    renamed = await tasks.update("alice", task.task_id, title="Water the ferns")
    assert renamed.title == "Water the ferns"
    assert renamed.due == date(2026, 3, 10)  # left out: unchanged
    assert renamed.status == "open" and renamed.source_key == "k"
    assert renamed.updated_at == START + timedelta(minutes=1)
    assert renamed.created_at == START

    clock.advance(timedelta(minutes=1))
    done = await tasks.complete("alice", task.task_id)
    assert done.status == "done" and done.completed_at == START + timedelta(minutes=2)
    clock.advance(timedelta(minutes=1))
    again = await tasks.complete("alice", task.task_id)
    assert again.completed_at == done.completed_at  # the first completion is kept
    assert again.updated_at == START + timedelta(minutes=3)

    cleared = await tasks.update("alice", task.task_id, due=None)
    assert cleared.due is None and cleared.status == "done" and cleared.title == "Water the ferns"
    reopened = await tasks.update("alice", task.task_id, status="open", due="2026-04-01")
    assert reopened.status == "open" and reopened.completed_at is None
    assert reopened.due == date(2026, 4, 1)
    assert await tasks.get("alice", task.task_id) == reopened


async def test_concurrent_updates_of_different_fields_both_land(engine: Engine) -> None:
    tasks = tasks_of(engine)
    task = await tasks.add("alice", "Old title")
    await asyncio.gather(
        tasks.update("alice", task.task_id, title="New title"),
        tasks.update("alice", task.task_id, status="done"),
        tasks.update("alice", task.task_id, due="2026-12-24"),
    )
    final = await tasks.get("alice", task.task_id)
    assert (final.title, final.status, final.due) == ("New title", "done", date(2026, 12, 24))
    assert final.completed_at is not None


async def test_another_users_task_is_not_found_like_an_unknown_id(engine: Engine) -> None:
    tasks = tasks_of(engine)
    task = await tasks.add("alice", "Alice's secret errand")
    unknown_id = other_id(task.task_id)
    attempts: tuple[Callable[[str], Awaitable[Task]], ...] = (
        lambda task_id: tasks.get("bob", task_id),
        lambda task_id: tasks.update("bob", task_id, title="mine now"),
        lambda task_id: tasks.complete("bob", task_id),
    )
    for attempt in attempts:
        with pytest.raises(NotFound) as other:
            await attempt(task.task_id)
        with pytest.raises(NotFound) as unknown:
            await attempt(unknown_id)
        assert other.value.code == unknown.value.code == "task_not_found"
        assert other.value.status == unknown.value.status == 404
        # The same words either way, but for the id the caller already knows.
        assert other.value.message.replace(task.task_id, "ID") == unknown.value.message.replace(
            unknown_id, "ID"
        )
    assert await tasks.get("alice", task.task_id) == task  # untouched
    assert await tasks.list_tasks("bob") == []


@pytest.mark.parametrize(
    ("title", "code"),
    [
        ("", "invalid_title"),
        ("   \t ", "invalid_title"),
        ("x" * (MAX_TITLE_CHARS + 1), "invalid_title"),
        ("x" * 1_000_000, "invalid_title"),
        ("line one\nline two", "invalid_title"),
        ("nul \x00 inside", "invalid_title"),
        ("escape \x1b[31m red", "invalid_title"),
        ("c1 \x85 control", "invalid_title"),
        ("lone \ud800 surrogate", "invalid_title"),
        (5, "invalid_title"),
        (None, "invalid_title"),
    ],
)
async def test_hostile_titles_are_refused_and_keep_nothing(
    engine: Engine, title: Any, code: str
) -> None:
    tasks = tasks_of(engine)
    assert await refused(tasks.add("alice", title)) == (code, 400)
    assert await tasks.list_tasks("alice") == []
    task = await tasks.add("alice", "fine")
    assert await refused(tasks.update("alice", task.task_id, title=title)) == (code, 400)
    assert (await tasks.get("alice", task.task_id)).title == "fine"


async def test_a_title_of_exactly_the_longest_length_is_kept(engine: Engine) -> None:
    longest = "é" * MAX_TITLE_CHARS  # characters, not bytes: 1000 bytes of UTF-8
    task = await tasks_of(engine).add("alice", f"  {longest}  ")
    assert (await tasks_of(engine).get("alice", task.task_id)).title == longest


@pytest.mark.parametrize(
    "due",
    [
        "2026-02-30",
        "2026-13-01",
        "0000-01-01",
        "20260302",
        "2026-W10-1",
        "2026-3-4",
        "2026-03-04T00:00",
        " 2026-03-04",
        "tomorrow",
        "",
        "\uff12\uff10\uff12\uff16-\uff10\uff13-\uff10\uff14",  # fullwidth digits: \d takes them
        20260302,
    ],
)
async def test_bad_due_dates_are_refused(engine: Engine, due: Any) -> None:
    tasks = tasks_of(engine)
    assert await refused(tasks.add("alice", "x", due=due)) == ("invalid_due", 400)
    task = await tasks.add("alice", "y", due="2026-01-01")
    assert await refused(tasks.update("alice", task.task_id, due=due)) == ("invalid_due", 400)
    assert (await tasks.get("alice", task.task_id)).due == date(2026, 1, 1)


async def test_leap_days_and_far_dates_are_dates(engine: Engine) -> None:
    tasks = tasks_of(engine)
    for text in ("2028-02-29", "0001-01-01", "9999-12-31"):
        task = await tasks.add("alice", "dated", due=text)
        assert (await tasks.get("alice", task.task_id)).due == date.fromisoformat(text)


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda t, i: t.list_tasks("alice", "closed"), "invalid_status"),
        (lambda t, i: t.list_tasks("alice", "OPEN"), "invalid_status"),
        (lambda t, i: t.list_tasks("alice", limit=0), "invalid_limit"),
        (lambda t, i: t.list_tasks("alice", limit=MAX_PAGE + 1), "invalid_limit"),
        (lambda t, i: t.list_tasks("alice", limit=True), "invalid_limit"),
        (lambda t, i: t.list_tasks("alice", limit="5"), "invalid_limit"),
        (lambda t, i: t.list_tasks("alice", after="nope"), "invalid_task_id"),
        (lambda t, i: t.update("alice", i, status="closed"), "invalid_status"),
        (lambda t, i: t.update("alice", i, status=None), "invalid_status"),
        (lambda t, i: t.update("alice", i, title=None), "invalid_title"),
        (lambda t, i: t.update("alice", i), "empty_update"),
        (lambda t, i: t.get("alice", "nope"), "invalid_task_id"),
        (lambda t, i: t.get("alice", i.upper()), "invalid_task_id"),
        (lambda t, i: t.get("alice", "../" + i), "invalid_task_id"),
        (lambda t, i: t.get("alice", "x" * 300), "invalid_task_id"),
        (lambda t, i: t.complete("alice", ""), "invalid_task_id"),
        (lambda t, i: t.add("alice", "x", source_key="bad key!"), "invalid_session_key"),
    ],
)
async def test_bad_statuses_limits_ids_and_empty_updates_are_4xx(
    engine: Engine, call: Any, code: str
) -> None:
    tasks = tasks_of(engine)
    task = await tasks.add("alice", "exists")
    assert await refused(call(tasks, task.task_id)) == (code, 400)
    assert await tasks.get("alice", task.task_id) == task


async def test_the_database_refuses_a_row_the_service_would_refuse(engine: Engine) -> None:
    store = tasks_of(engine).store
    good = await tasks_of(engine).add("alice", "good")
    bad_rows = [
        Task(**{**_fields(good), "task_id": other_id(good.task_id), "status": "done"}),
        Task(**{**_fields(good), "task_id": other_id(other_id(good.task_id)), "title": ""}),
    ]
    for row in bad_rows:  # done without completed_at; an empty title
        with pytest.raises(Exception):  # noqa: B017, PT011 - each store has its own error
            await store.add_task(row)
    assert [t.task_id for t in await store.list_tasks("alice", None, 10, None)] == [good.task_id]


def _fields(task: Task) -> dict[str, Any]:
    return {name: getattr(task, name) for name in Task.__slots__}


async def test_erasing_a_key_keeps_its_tasks(engine: Engine) -> None:
    tasks = tasks_of(engine)
    await collect(engine, "hi", key="chat:alice")
    task = await tasks.add("alice", "from the chat", source_key="chat:alice", source_turn_id="t")
    await engine.sessions.delete("chat:alice", Caller("alice"))
    assert await tasks.get("alice", task.task_id) == task  # source kept as it was


async def test_erasing_a_user_removes_their_tasks_only(engine: Engine) -> None:
    tasks = tasks_of(engine)
    for n in range(3):
        await tasks.add("alice", f"alice {n}")
    kept = await tasks.add("bob", "bob's")
    assert await tasks.erase_user("alice") == 3
    assert await tasks.list_tasks("alice") == []
    assert await tasks.list_tasks("bob") == [kept]
    assert await tasks.erase_user("alice") == 0


# -- the tools, through the registry, on both stores --------------------------------------


async def test_tools_through_the_registry_act_for_the_caller_only(engine: Engine) -> None:
    offered = await engine.tools.offered(["tasks_*"], None, primary=False)
    assert list(offered) == ["tasks_add", "tasks_complete", "tasks_list"]
    assert all(tool.source == "builtin" for tool in offered.values())

    async def call(name: str, arguments: Any, context: ToolContext = ALICE_CONTEXT) -> Any:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        return await engine.tools.call(offered, "c", name, raw, context, limit_seconds=10)

    added = await call("tasks_add", {"title": "Book the train", "due": "2026-04-02"})
    assert added.status == "ok", added.content
    assert "Book the train" in added.content and "due 2026-04-02" in added.content
    task_id = added.data["id"]
    assert added.data["source"] == {"key": "chat:alice", "turn_id": "turn-1"}
    assert added.data["status"] == "open" and added.data["due"] == "2026-04-02"
    stored = await tasks_of(engine).get("alice", task_id)
    assert (stored.source_key, stored.source_turn_id) == ("chat:alice", "turn-1")

    listed = await call("tasks_list", {})
    assert listed.status == "ok" and task_id in listed.content
    assert [t["id"] for t in listed.data["tasks"]] == [task_id] and listed.data["more"] is False
    theirs = await call("tasks_list", {"status": "all"}, BOB_CONTEXT)
    assert theirs.data["tasks"] == [] and "no tasks" in theirs.content

    stolen = await call("tasks_complete", {"id": task_id}, BOB_CONTEXT)
    unknown = await call("tasks_complete", {"id": other_id(task_id)}, BOB_CONTEXT)
    assert stolen.status == unknown.status == "error"
    assert stolen.content.replace(task_id, "ID") == unknown.content.replace(other_id(task_id), "ID")
    assert (await tasks_of(engine).get("alice", task_id)).status == "open"

    completed = await call("tasks_complete", {"id": task_id})
    assert completed.status == "ok" and completed.data["status"] == "done"
    assert "done" in completed.content
    assert (await call("tasks_list", {})).data["tasks"] == []
    done = await call("tasks_list", {"status": "done"})
    assert [t["id"] for t in done.data["tasks"]] == [task_id]


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("tasks_add", {"title": ""}, "title"),
        ("tasks_add", {"title": "   "}, "title must not be empty"),
        ("tasks_add", {"title": "x" * (MAX_TITLE_CHARS + 1)}, "title"),
        ("tasks_add", {"title": "a\nb"}, "one line"),
        ("tasks_add", {"title": "x", "due": "tomorrow"}, "due"),
        ("tasks_add", {"title": "x", "due": "2026-02-30"}, "not a calendar date"),
        ("tasks_add", {"title": "x", "user": "bob"}, "user"),
        ("tasks_add", '{"title": "x"', "not valid JSON"),
        ("tasks_list", {"status": "closed"}, "status"),
        ("tasks_complete", {"id": "nope"}, "lower-case UUID"),
        ("tasks_complete", {}, "id"),
    ],
)
async def test_bad_tool_arguments_are_error_results(
    engine: Engine, name: str, arguments: Any, says: str
) -> None:
    offered = await engine.tools.offered(["tasks_*"], None, primary=True)
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    result = await engine.tools.call(offered, "c", name, raw, ALICE_CONTEXT, limit_seconds=10)
    assert result.status == "error"
    assert says in result.content
    assert await tasks_of(engine).list_tasks("alice") == []


async def test_tasks_list_shows_at_most_fifty_and_says_there_are_more(engine: Engine) -> None:
    for n in range(51):
        await tasks_of(engine).add("alice", f"chore {n}")
    offered = await engine.tools.offered(["tasks_list"], None, primary=True)
    listed = await engine.tools.call(
        offered, "c", "tasks_list", "{}", ALICE_CONTEXT, limit_seconds=10
    )
    assert len(listed.data["tasks"]) == 50 and listed.data["more"] is True
    assert "chore 49" in listed.content and "chore 50" not in listed.content
    assert "there are more" in listed.content


# -- one agent turn -----------------------------------------------------------------------


@pytest.fixture
async def engines() -> AsyncIterator[list[Engine]]:
    built: list[Engine] = []
    yield built
    for engine in built:
        await engine.aclose()


async def test_a_turn_adds_a_task_and_the_model_answers(
    engines: list[Engine], tmp_path: Path, clock: ManualClock, database_url: str
) -> None:
    model = ToolModel(
        [Call("tasks_add", {"title": "Call the dentist", "due": "2026-03-05"}, "a1")],
        "Done: I added it.",
        repeat_last=False,
    )
    engine = build_engine(
        make_settings(
            tmp_path,
            {"main": {"model": model.name, "tools": ["tasks_*"]}},
            database_url=database_url,
        ),
        clock=clock,
        models={model.name: model},
    )
    engines.append(engine)
    await engine.start()
    events = await collect(engine, "remind me to call the dentist on Thursday")
    assert [e.type for e in events][-1] == "end"
    (end,) = [e for e in events if e.type == "tool_end"]
    assert end.status == "ok" and "Call the dentist" in end.output
    turn_id = events[0].turn_id

    (task,) = await tasks_of(engine).list_tasks("alice")
    assert (task.title, task.due) == ("Call the dentist", date(2026, 3, 5))
    assert (task.source_key, task.source_turn_id) == ("chat:alice", turn_id)

    assert [s.name for s in model.requests[0].options.tools] == [
        "tasks_add",
        "tasks_complete",
        "tasks_list",
    ]
    result = model.requests[1].messages[-1]
    assert result["role"] == "tool" and "Call the dentist" in str(result["content"])
    latest = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
    messages = await engine.store.list_messages(latest.session_id)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert messages[-1].content.strip() == "Done: I added it."


# -- /v1/tasks through the real app -------------------------------------------------------


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path_factory.mktemp("tasks"),
        agents={"defaults": {"model": "scripted", "tools": ["tasks_*"]}},
    )
    # An agent that offers tools needs a model that can call them.
    with running_gateway(settings, {"scripted": ToolModel("ok", name="scripted")}) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=10) as c:
        yield c


TASK_KEYS = {"id", "title", "status", "due", "source", "created_at", "updated_at"}
INSTANT = r"\d{4}-\d\d-\d\dT[\d:.]+Z"


def test_tasks_over_http_add_list_update(gw: Gateway, client: httpx.Client) -> None:
    alice = gw.auth("alice")
    created = client.post(
        "/v1/tasks", json={"title": " Pay rent ", "due": "2026-04-01"}, headers=alice
    )
    assert created.status_code == 201, created.text
    task = created.json()
    assert set(task) == TASK_KEYS
    assert (task["title"], task["status"], task["due"], task["source"]) == (
        "Pay rent",
        "open",
        "2026-04-01",
        None,
    )
    assert re.fullmatch(INSTANT, task["created_at"]) and task["updated_at"] == task["created_at"]

    listed = client.get("/v1/tasks", headers=alice).json()
    assert listed == {"tasks": [task], "next_after": None}

    done = client.patch(f"/v1/tasks/{task['id']}", json={"status": "done"}, headers=alice)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "done" and done.json()["due"] == "2026-04-01"
    assert client.get("/v1/tasks?status=open", headers=alice).json()["tasks"] == []
    (only,) = client.get("/v1/tasks", params={"status": "done"}, headers=alice).json()["tasks"]
    assert only["id"] == task["id"] and only["status"] == "done"

    cleared = client.patch(
        f"/v1/tasks/{task['id']}", json={"due": None, "title": "Pay the rent"}, headers=alice
    ).json()
    assert (cleared["due"], cleared["title"], cleared["status"]) == (None, "Pay the rent", "done")


def test_listing_pages_with_next_after(gw: Gateway, client: httpx.Client) -> None:
    root = gw.auth("root")
    ids = [
        client.post("/v1/tasks", json={"title": f"page {n}"}, headers=root).json()["id"]
        for n in range(5)
    ]
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = client.get("/v1/tasks", params=params, headers=root).json()
        seen += [t["id"] for t in page["tasks"]]
        if page["next_after"] is None:
            break
        params["after"] = page["next_after"]
    assert seen == ids


def test_another_users_task_is_404_with_the_body_of_an_unknown_id(
    gw: Gateway, client: httpx.Client
) -> None:
    task = client.post("/v1/tasks", json={"title": "alice only"}, headers=gw.auth("alice")).json()
    other = client.patch(f"/v1/tasks/{task['id']}", json={"status": "done"}, headers=gw.auth("bob"))
    unknown_id = other_id(task["id"])
    unknown = client.patch(
        f"/v1/tasks/{unknown_id}", json={"status": "done"}, headers=gw.auth("bob")
    )
    assert other.status_code == unknown.status_code == 404
    assert other.json()["error"]["code"] == unknown.json()["error"]["code"] == "task_not_found"
    assert other.text.replace(task["id"], "ID") == unknown.text.replace(unknown_id, "ID")
    # An admin is no exception: tasks are the caller's own.
    admin = client.patch(f"/v1/tasks/{task['id']}", json={"title": "x"}, headers=gw.auth("root"))
    assert admin.status_code == 404
    assert task["id"] not in client.get("/v1/tasks", headers=gw.auth("bob")).text
    mine = client.get("/v1/tasks", headers=gw.auth("alice")).json()["tasks"]
    assert {"id": task["id"], "status": "open", "title": "alice only"}.items() <= next(
        t for t in mine if t["id"] == task["id"]
    ).items()


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/tasks", {}, 400, "invalid_request"),
        ("POST", "/v1/tasks", {"title": 5}, 400, "invalid_request"),
        ("POST", "/v1/tasks", {"title": "x", "owner": "bob"}, 400, "invalid_request"),
        ("POST", "/v1/tasks", {"title": "x", "status": "done"}, 400, "invalid_request"),
        ("POST", "/v1/tasks", {"title": "x", "due": 20260302}, 400, "invalid_request"),
        ("POST", "/v1/tasks", [{"title": "x"}], 400, "invalid_request"),
        ("POST", "/v1/tasks", {"title": "  "}, 400, "invalid_title"),
        ("POST", "/v1/tasks", {"title": "x" * 501}, 400, "invalid_title"),
        ("POST", "/v1/tasks", {"title": "x" * 60_000}, 400, "invalid_title"),
        ("POST", "/v1/tasks", {"title": "x" * 70_000}, 413, "payload_too_large"),
        ("POST", "/v1/tasks", {"title": "a\u0000b"}, 400, "invalid_title"),
        ("POST", "/v1/tasks", {"title": "x", "due": "2026-02-30"}, 400, "invalid_due"),
        ("POST", "/v1/tasks", {"title": "x", "due": "next week"}, 400, "invalid_due"),
        ("PATCH", "/v1/tasks/{id}", {}, 400, "empty_update"),
        ("PATCH", "/v1/tasks/{id}", {"status": "closed"}, 400, "invalid_status"),
        ("PATCH", "/v1/tasks/{id}", {"status": None}, 400, "invalid_status"),
        ("PATCH", "/v1/tasks/{id}", {"title": None}, 400, "invalid_title"),
        ("PATCH", "/v1/tasks/{id}", {"due": "2026-3-4"}, 400, "invalid_due"),
        ("PATCH", "/v1/tasks/{id}", {"id": "x", "title": "y"}, 400, "invalid_request"),
        ("PATCH", "/v1/tasks/not-an-id", {"status": "done"}, 400, "invalid_task_id"),
        ("PATCH", "/v1/tasks/" + "a" * 2000, {"status": "done"}, 400, "invalid_task_id"),
        ("GET", "/v1/tasks?status=closed", None, 400, "invalid_status"),
        ("GET", "/v1/tasks?limit=0", None, 400, "invalid_limit"),
        ("GET", "/v1/tasks?limit=201", None, 400, "invalid_limit"),
        ("GET", "/v1/tasks?limit=many", None, 400, "invalid_request"),
        ("GET", "/v1/tasks?after=nope", None, 400, "invalid_task_id"),
        ("DELETE", "/v1/tasks/{id}", None, 405, "method_not_allowed"),
    ],
)
def test_hostile_requests_get_a_4xx_with_a_code(
    gw: Gateway,
    client: httpx.Client,
    method: str,
    path: str,
    body: Any,
    status: int,
    code: str,
) -> None:
    bob = gw.auth("bob")
    task = client.post("/v1/tasks", json={"title": "target"}, headers=bob).json()
    response = client.request(method, path.format(id=task["id"]), json=body, headers=bob)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    # Nothing refused changed the task.
    (now,) = [
        t for t in client.get("/v1/tasks", headers=bob).json()["tasks"] if t["id"] == task["id"]
    ]
    assert now == task


def test_raw_bodies_and_missing_keys_are_refused(gw: Gateway, client: httpx.Client) -> None:
    lone = client.post(
        "/v1/tasks",
        content=b'{"title": "lone \\ud800 surrogate"}',
        headers={**gw.auth("prime"), "Content-Type": "application/json"},
    )
    assert lone.status_code == 400 and lone.json()["error"]["code"] == "invalid_title"
    broken = client.post(
        "/v1/tasks",
        content=b'{"title": ',
        headers={**gw.auth("prime"), "Content-Type": "application/json"},
    )
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
    assert client.get("/v1/tasks").status_code == 401
    unauthorized = client.post(
        "/v1/tasks", json={"title": "x"}, headers={"Authorization": "Bearer sg_nope"}
    )
    assert unauthorized.status_code == 401
    assert client.get("/v1/tasks", headers=gw.auth("prime")).json()["tasks"] == []


def test_the_tasks_tools_are_listed_as_builtin(gw: Gateway, client: httpx.Client) -> None:
    tools = client.get("/v1/tools", headers=gw.auth("alice")).json()["tools"]
    by_name = {t["name"]: t for t in tools}
    assert set(by_name) == {"tasks_add", "tasks_list", "tasks_complete"}
    assert {t["source"] for t in by_name.values()} == {"builtin"}
    add = by_name["tasks_add"]["parameters"]
    assert add["required"] == ["title"] and add["additionalProperties"] is False
    assert add["properties"]["title"]["maxLength"] == MAX_TITLE_CHARS
    assert by_name["tasks_list"]["parameters"]["properties"]["status"]["enum"] == [
        "open",
        "done",
        "all",
    ]
    assert by_name["tasks_complete"]["parameters"]["required"] == ["id"]
