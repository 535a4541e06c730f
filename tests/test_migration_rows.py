"""`sessiongate migrate`'s pure rules (store/migration_rows.py): the copy order, and each
kind of value's way to PostgreSQL and back meeting in the checksums' representation."""

from __future__ import annotations

import pytest

from sessiongate.store.migration_rows import (
    copy_order,
    postgres_canonical,
    sqlite_canonical,
    to_postgres,
)


def test_the_copy_order_puts_every_table_after_those_it_references() -> None:
    order = copy_order(
        ["api_keys", "compactions", "messages", "segments", "session_keys", "users"],
        [
            ("api_keys", "users", False),
            ("compactions", "segments", False),
            ("messages", "segments", False),
            ("segments", "session_keys", True),
            ("session_keys", "segments", True),
        ],
    )
    assert order.index("users") < order.index("api_keys")
    assert order[order.index("session_keys") : order.index("session_keys") + 3] == [
        "session_keys",
        "segments",
        "messages",
    ]
    assert order.index("messages") < order.index("compactions")
    with pytest.raises(ValueError, match="cycle"):
        copy_order(["a", "b"], [("a", "b", False), ("b", "a", False)])


@pytest.mark.parametrize(
    ("kind", "stored"),
    [
        ("time", 1_780_000_000_123_456),
        ("date", "2026-05-01"),
        ("bool", 1),
        ("bool", 0),
        ("json", '{"b":1, "a":[2]}'),
        ("jsonb", '{"b":1,"a":[2]}'),
        ("text_array", '["p1","p2"]'),
        ("bytes", b"\x00\x80\x3f\xff"),
        ("float", 0.1),
        ("int", 2**62),
        ("text", "naïve ☕"),
    ],
)
def test_a_value_comes_back_from_postgresql_as_it_was(kind: str, stored: object) -> None:
    """Each kind's way there (the writers' conversion) and back (the readers') meet."""
    there = to_postgres(kind, stored)
    assert postgres_canonical(kind, there) == sqlite_canonical(kind, stored)
    assert postgres_canonical(kind, None) is None and to_postgres(kind, None) is None


def test_a_time_that_lost_its_microseconds_does_not_match() -> None:
    there = to_postgres("time", 1_780_000_000_123_456).replace(microsecond=0)
    assert postgres_canonical("time", there) != sqlite_canonical("time", 1_780_000_000_123_456)
