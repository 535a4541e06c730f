"""`sessiongate serve` (tests/support/served.py) whose model is an `openai` provider
pointed at a local fake server (tests/support/fake_providers.py): for end-to-end tests of
what the gateway does with what a provider streams.

The fake server runs in the test's own event loop, so tests talk to the gateway with an
async client; start-up (adding the user with the CLI, waiting for /health) blocks, which
is harmless because nothing asks the fake server anything until a turn runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.served import served_gateway


@dataclass(frozen=True)
class ServedGateway:
    url: str
    key: str
    log: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def fake_model_config(model_url: str, more: str) -> str:
    """Agents whose model is `fake` (openai at `model_url`, no retries), followed by
    `more` (TOML sections: `[agents.main]`, `[limits]`, …)."""
    return (
        '[models.fake]\nprovider = "openai"\nmodel = "fake-model"\n'
        f"base_url = {json.dumps(model_url + '/v1')}\nmax_retries = 0\n"
        '[agents.defaults]\nmodel = "fake"\n'
        f"{more}\n"
    )


@contextmanager
def serve_with_fake_model(
    directory: Path, model_url: str, more: str = ""
) -> Iterator[ServedGateway]:
    """Serve with the user `alice` (not primary) added by the CLI; stopped with SIGTERM
    (SIGKILL if it does not stop) at the end."""
    config = fake_model_config(model_url, more)
    with served_gateway(directory, config, {"alice": ()}) as served:
        yield ServedGateway(served.url, served.keys["alice"], served.log)
