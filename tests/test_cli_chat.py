"""`sessiongate chat` against a real gateway: streams replies, shows rotations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel


def chat(url: str, api_key: str, typed: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the chat client as a user would, typing `typed` at its prompt."""
    env = {**os.environ, "COLUMNS": "200", "SESSIONGATE_API_KEY": api_key}
    return subprocess.run(
        [sys.executable, "-m", "sessiongate.cli.main", "chat", "--url", url, *args],
        input=typed,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_chat_streams_replies_and_shows_new_segments(tmp_path: Path) -> None:
    with running_gateway(gateway_settings(tmp_path), {"scripted": ScriptedModel()}) as gw:
        result = chat(
            gw.url, gw.keys["alice"], "hello there\n/new\nsecond topic\n", "--key", "cli:chat"
        )
        assert result.returncode == 0, result.stderr
        assert "reply to: hello there" in result.stdout
        assert "new segment (manual)" in result.stdout
        assert "reply to: second topic" in result.stdout
        # Reconnecting shows the history of the latest segment.
        again = chat(gw.url, gw.keys["alice"], "", "--key", "cli:chat")
        assert "second topic" in again.stdout and "hello there" not in again.stdout


def test_chat_reports_a_bad_key(tmp_path: Path) -> None:
    with running_gateway(gateway_settings(tmp_path), {"scripted": ScriptedModel()}) as gw:
        result = chat(gw.url, "sg_AAAAAAAAAAAA_" + "x" * 43, "hi\n")
        assert "invalid_api_key" in result.stdout


def test_chat_commands_help_history_sessions(tmp_path: Path) -> None:
    with running_gateway(gateway_settings(tmp_path), {"scripted": ScriptedModel()}) as gw:
        typed = "/history\nfirst words\n/help\n/bogus\n/history\n/sessions\n/new\n/history\n/quit\n"
        result = chat(gw.url, gw.keys["alice"], typed)
        assert result.returncode == 0, result.stderr
        out = result.stdout
        # Before any turn the routed key is unknown; after one, /history shows it.
        assert "no conversation yet" in out
        assert "reply to: first words" in out
        assert "/sessions" in out and "/history" in out and "/quit" in out  # the /help list
        assert "unknown command /bogus" in out
        assert "chat:alice" in out and "segment" in out  # /history names key and segment
        assert "user: first words" in out and "assistant: reply to: first words" in out
        assert "2 message(s) in 1 segment(s)" in out  # /sessions
        assert "new segment (manual)" in out
        assert "chat:alice has no messages yet" in out  # /history after /new


def test_chat_shows_compactions_through_sessiongate_serve(tmp_path: Path) -> None:
    """Issue 21: `/compact` goes to the gateway, and its `compaction` event is a line."""
    from tests.support.served import relay_model, served_gateway

    config = relay_model(tmp_path, "relay", context_window=4096)
    config += (
        '[agents.defaults]\nmodel = "relay"\n'
        "[agents.defaults.context]\nkeep_recent = 2\ncompact_at = 1.0\n"
    )
    with served_gateway(tmp_path, config, {"alice": ("--primary",)}) as served:
        typed = "/compact\none\ntwo\nthree\n/compact keep the numbers\n"
        result = chat(served.url, served.keys["alice"], typed, "--key", "cli:compact")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "nothing to compact yet" in out
    assert "messages #1-#4 summarised" in out and "the originals are kept" in out
    assert "unknown command" not in out


def test_working_set_events_in_words() -> None:
    from sessiongate.cli.chat import compaction_line

    assert "failed: nothing was lost" in compaction_line({"status": "failed"})
    waited = compaction_line(
        {
            "status": "waited",
            "covers": {"first_seq": 1, "last_seq": 9, "count": 9},
            "tokens_before": 900,
            "tokens_after": 40,
            "compaction_id": "c1",
        }
    )
    assert waited.startswith("messages #1-#9 summarised (900 -> 40 tokens, compaction c1)")
    assert "waited" in waited
    assert compaction_line({"status": "unavailable"}) == "this agent's context is not compacted"
    carried = {"carried_from": "s-1", "covers": {"first_seq": 1, "last_seq": 6, "count": 6}}
    assert compaction_line({**carried, "status": "waited"}) == (
        "the previous conversation (messages #1-#6) was summarised and carried over"
        " (this turn waited for it)"
    )
    assert "not ready" in compaction_line({"status": "pending", "carried_from": "s-1"})
    assert "nothing was carried over" in compaction_line({"status": "failed", "carried_from": "s"})
