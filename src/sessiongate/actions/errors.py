"""Why a script could not be run in the sandbox (as opposed to how a script that ran ended,
which is an `ActionResult`)."""

from __future__ import annotations

from sessiongate.errors import SessionGateError


class SandboxUnavailable(SessionGateError):
    """No sandbox can be had on this host (bubblewrap or the interpreter is missing, or
    bubblewrap cannot create its namespaces here), or the sandbox is shut down. Scripts
    are then refused: nothing ever runs unconfined."""

    code = "sandbox_unavailable"
    status = 503


class SandboxBusy(SessionGateError):
    """`actions.max_concurrent` scripts are running already; one more is refused at once
    rather than queued without bound. A capacity answer of the gateway, not the caller's
    fault, hence 503 (retry later) rather than 429."""

    code = "sandbox_busy"
    status = 503
