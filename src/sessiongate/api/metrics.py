"""Prometheus metrics: turns, rotations by reason, model latency, errors, quota refusals,
compactions of the working set by status.

With several worker processes (`server.workers > 1`) every worker writes its samples to
files in the directory named by PROMETHEUS_MULTIPROC_DIR (set by `sessiongate serve`
before the workers start), and /metrics on any worker reports the sum over all of them.
"""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from sessiongate.core.segments import RotationRecord
from sessiongate.core.working_set import CompactionRecord
from sessiongate.service.turn.pipeline import TurnOutcome

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"


class GatewayMetrics:
    """One registry per app, so several apps (tests) never collide."""

    def __init__(self) -> None:
        self.multiprocess_dir = os.environ.get(MULTIPROCESS_ENV) or None
        self.registry = CollectorRegistry()
        self.turns = Counter(
            "sessiongate_turns",
            "Turns by agent and outcome",
            ["agent", "outcome"],
            registry=self.registry,
        )
        self.rotations = Counter(
            "sessiongate_rotations", "Rotations by reason", ["reason"], registry=self.registry
        )
        self.errors = Counter(
            "sessiongate_turn_errors",
            "Failed turns by error code",
            ["code"],
            registry=self.registry,
        )
        self.first_token = Histogram(
            "sessiongate_model_first_token_seconds",
            "Model time to first token",
            ["model"],
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.turn_seconds = Histogram(
            "sessiongate_turn_seconds",
            "Whole-turn latency",
            ["agent"],
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
        )
        self.quota_refusals = Counter(
            "sessiongate_quota_refusals",
            "Requests refused over a quota (429 quota_exceeded), by quota",
            ["quota"],
            registry=self.registry,
        )
        self.compactions = Counter(
            "sessiongate_compactions",
            "Compactions of the working set by status (done, reverted, failed)",
            ["status"],
            registry=self.registry,
        )
        self.websockets = Gauge(
            "sessiongate_websocket_connections",
            "Open WebSockets",
            ["endpoint"],
            registry=self.registry,
            multiprocess_mode="livesum",  # the open sockets of the workers still running
        )

    def rotation(self, record: RotationRecord) -> None:
        self.rotations.labels(record.reason.value).inc()

    def compaction(self, _session_id: str, _record: CompactionRecord | None, status: str) -> None:
        self.compactions.labels(status).inc()

    def quota_refused(self, kind: str) -> None:
        self.quota_refusals.labels(kind).inc()

    def turn(self, outcome: TurnOutcome) -> None:
        self.turns.labels(outcome.agent, outcome.status).inc()
        self.turn_seconds.labels(outcome.agent).observe(outcome.seconds)
        if outcome.error_code:
            self.errors.labels(outcome.error_code).inc()
        if outcome.model and outcome.first_token_seconds is not None:
            self.first_token.labels(outcome.model).observe(outcome.first_token_seconds)

    def render(self) -> bytes:
        if self.multiprocess_dir is None:
            return generate_latest(self.registry)
        combined = CollectorRegistry()
        MultiProcessCollector(combined, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return generate_latest(combined)

    def process_stopped(self) -> None:
        """A worker's last word: its open-socket gauge no longer counts."""
        if self.multiprocess_dir is not None:
            mark_process_dead(os.getpid(), self.multiprocess_dir)  # type: ignore[no-untyped-call]
