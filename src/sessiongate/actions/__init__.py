"""Actions: running the scripts of `actions = "sandbox"` agents on the gateway host,
confined by bubblewrap (docs/actions.md)."""

from sessiongate.actions.errors import SandboxBusy, SandboxUnavailable
from sessiongate.actions.sandbox import ActionResult, ScriptRunner, build_sandbox

__all__ = ["ActionResult", "SandboxBusy", "SandboxUnavailable", "ScriptRunner", "build_sandbox"]
