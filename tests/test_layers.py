"""The architecture's layering holds in the imports (docs/architecture.md): the pure core
imports no adapter, service or transport, and a transport reaches data only through a
service, never the store. Read from each module's syntax tree, so an import inside a
function or under `TYPE_CHECKING` counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "sessiongate"

#: Layer (a folder of src/sessiongate) -> the layers its modules must never import.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "core": ("store", "models", "service", "api", "agents", "speech", "actions", "cli"),
    "api": ("store",),
}


def imported_modules(source: str) -> set[str]:
    """Every module an import statement in `source` names (`from a.b import c` names
    `a.b` and `a.b.c`, since `c` may be a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def breaks(layer: str, forbidden: tuple[str, ...], package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted((package / layer).rglob("*.py")):
        for name in sorted(imported_modules(path.read_text(encoding="utf-8"))):
            parts = name.split(".")
            if len(parts) > 1 and parts[0] == "sessiongate" and parts[1] in forbidden:
                found.append(f"{path.relative_to(package).as_posix()} imports {name}")
    return found


def test_the_core_imports_no_adapter_service_or_transport() -> None:
    assert breaks("core", FORBIDDEN["core"]) == []


def test_transports_never_import_the_store() -> None:
    assert breaks("api", FORBIDDEN["api"]) == []


def test_the_rule_sees_every_kind_of_import(tmp_path: Path) -> None:
    # Today's two old breaks, written the ways an import can be: each one is caught.
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "plans.py").write_text(
        "from sessiongate.models.base import ToolSpec\n", encoding="utf-8"
    )
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "notes.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from sessiongate.store.notes import Note\n"
        "def build():\n"
        "    import sessiongate.store.sqlite.store\n"
        "    from sessiongate.store import sqlite\n",
        encoding="utf-8",
    )
    assert breaks("core", FORBIDDEN["core"], tmp_path) == [
        "core/plans.py imports sessiongate.models.base",
        "core/plans.py imports sessiongate.models.base.ToolSpec",
    ]
    assert breaks("api", FORBIDDEN["api"], tmp_path) == [
        "api/notes.py imports sessiongate.store",
        "api/notes.py imports sessiongate.store.notes",
        "api/notes.py imports sessiongate.store.notes.Note",
        "api/notes.py imports sessiongate.store.sqlite",
        "api/notes.py imports sessiongate.store.sqlite.store",
    ]
