"""Through `sessiongate serve` (issue 21): a summary model that answers with more than it
read gets its summaries refused (nothing stored, every turn still answered, the trim
announced), and it is not asked again on every turn (the backoff)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.gateway import parse_sse
from tests.support.served import served_gateway

LETTER_MODEL = """\
import json, pathlib, sys
body = json.load(sys.stdin)
if str(body["messages"][0].get("content", "")).startswith("You compact the earlier part"):
    with open(sys.argv[1], "a") as asked:
        asked.write("summary\\n")
    sys.stdout.write("Dear user, here is a long letter instead of a summary. " * 200)
else:
    sys.stdout.write("ok")
"""


def test_a_model_that_writes_letters_is_refused_and_backed_off(tmp_path: Path) -> None:
    script = tmp_path / "letter_model.py"
    script.write_text(LETTER_MODEL, encoding="utf-8")
    asked = tmp_path / "asked.txt"
    command = json.dumps([sys.executable, str(script), str(asked)])
    config = (
        f'[models.letters]\nprovider = "command"\ncommand = {command}\ncontext_window = 4096\n'
        '[agents.defaults]\nmodel = "letters"\nmemory_window = 4\n'
        "[agents.defaults.context]\nkeep_recent = 2\n"
    )
    with served_gateway(tmp_path, config, {"alice": ()}) as served, served.client("alice") as http:
        statuses: list[str] = []
        trims = 0
        for turn in range(14):
            answer = http.post("/v1/sessions/c:letters/messages", json={"content": f"turn {turn}"})
            assert answer.status_code == 200, answer.text
            events = parse_sse(answer.text)
            assert events[-1][0] == "end"  # every turn answered
            statuses += [data["status"] for name, data in events if name == "compaction"]
            trims += sum(1 for name, _ in events if name == "context_trimmed")
        kept = http.get("/v1/sessions/c:letters/compactions").json()["compactions"]
    assert kept == []  # no letter was stored as a summary
    assert statuses and set(statuses) == {"failed"}
    assert trims >= 10  # what did not fit was announced
    summary_requests = asked.read_text().count("summary")
    # Due from the third turn on; after each refusal the next attempt waits 0, 1, 3, 7
    # due turns, so a dozen due turns ask at most four times (every turn would be 12).
    assert 2 <= summary_requests <= 4
