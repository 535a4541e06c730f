"""The docs are checked like code: these tests fail when the code grows a configuration
field, a module or a command that the docs do not describe, when the docs describe one that
no longer exists, or when a doc links somewhere a reader of the repository cannot follow.
Everything is discovered from the code, so a new field, module or command fails here until
it is documented.

Conventions, one per contract:

Configuration: docs/configuration.md. `Settings` is walked through every nested section
model; each leaf field gets a dotted name (`data_dir`, `limits.max_reply_chars`,
`lifecycle.semantic.cooldown`). A dict-valued section contributes `*` for its key:
`models.*.provider`, `agents.*.turn_timeout`. In the Markdown, a heading names the sections
it documents as backticked TOML table headers (`` ## `[limits]` ``,
`` ## `[lifecycle.semantic]` ``); a placeholder in angle brackets stands for `*`, so
`` ## `[models.<name>]` `` documents `models.*` (`[agents.defaults]`, a concrete key, may sit
beside it). The heading `## Top level` documents the fields of `Settings` itself. A field is
documented by a table row under such a heading whose first cell is the field's name in
backticks. A deeper heading without a table header (`### PostgreSQL`) stays in its parent's
section; any other heading ends it.

Modules: docs/architecture.md. Its code block starting with the line `src/sessiongate/` is
the contract: a tree where each indented line names a directory (`store/`) or a file
(`sqlite.py`, then what it does) under the nearest less-indented directory. Every `*.py`
under src/sessiongate/ must be in the tree by its path relative to src/sessiongate/
(`store/sqlite.py`), with a description; a package's `__init__.py` is named by its
directory line (`store/migrations/` covers `store/migrations/__init__.py`). Every file and
directory in the tree must exist.

Commands: README.md's table under `## Commands` is the contract. The `sessiongate` typer
app is turned into its click command tree (`typer.main.get_command`) and walked; every
command that runs something (`sessiongate serve`, `sessiongate sessions show`) has a row
whose first cell is a code span starting with that full invocation, and every one of its
options (by long name, `--owner`) and arguments (upper-cased, `KEY`) appears in that row.
Every row must name a command that exists.

Links: every Markdown link in README.md and docs/*.md outside code (inline, reference-style,
image, autolink, and the bare URLs GitHub turns into links) must be a relative path to a
file or directory inside the repository, optionally followed by `#anchor`; an anchor into a
Markdown file (or the same file) must match one of its headings, slugged as GitHub does.
No scheme (`https:`, `mailto:`), no absolute path, no `..` that leaves the repository. An
outside reference is written as plain text (a URL in a code span), not as a link.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel

from sessiongate.cli.main import app
from sessiongate.config import Settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "sessiongate"
DOCS = ROOT / "docs"


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


# --- Markdown basics -------------------------------------------------------------------

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def _outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) for every line that is not inside a fenced code block."""
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
        elif fence is not None and match and match.group(1).startswith(fence):
            fence = None
        elif fence is None:
            yield number, line


def _fenced_blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    current: list[str] | None = None
    fence = ""
    for line in text.splitlines():
        match = _FENCE.match(line)
        if current is None and match:
            fence, current = match.group(1), []
        elif current is not None and match and match.group(1).startswith(fence):
            blocks.append(current)
            current = None
        elif current is not None:
            current.append(line)
    return blocks


_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def _table_cells(line: str) -> list[str] | None:
    """The cells of a table row, or None for a line that is not one (or a separator)."""
    stripped = line.strip()
    if not stripped.startswith("|"):
        return None
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", stripped.strip("|"))]
    if all(re.fullmatch(r":?-+:?", c) for c in cells if c):
        return None
    return cells


def _code_spans(text: str) -> list[str]:
    return [m.group(2).strip() for m in _CODE_SPAN.finditer(text)]


# --- 1. configuration fields -----------------------------------------------------------


def _section_models(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The section models inside a field's type, each with the path step it adds: "" for
    the model itself (also inside `X | None`), "*" for a dict's values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("", annotation)]
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return [found for arg in args for found in _section_models(arg)]
    if origin is dict and len(args) == 2:
        return [("*" + step, model) for step, model in _section_models(args[1])]
    if origin in (list, tuple, set, frozenset) and args:
        return [("*" + step, model) for step, model in _section_models(args[0])]
    return []


def config_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every leaf field's dotted name, nested section models and dict sections included."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        sections = _section_models(info.annotation)
        if not sections:
            names.add(prefix + name)
        for step, section in sections:
            names |= config_fields(section, f"{prefix}{name}.{step + '.' if step else ''}")
    return names


_TABLE_HEADER = re.compile(r"`\[([^\]`]+)\]`")


def documented_config_fields(text: str) -> set[str]:
    """Dotted names of the fields a configuration reference documents (see the module
    docstring for the convention)."""
    found: set[str] = set()
    sections: list[str] | None = None
    level = 0
    for _, line in _outside_fences(text):
        heading = _HEADING.match(line)
        if heading:
            depth, title = len(heading.group(1)), heading.group(2)
            named = [re.sub(r"<[^>]+>", "*", h) for h in _TABLE_HEADER.findall(title)]
            if named:
                sections, level = [s + "." for s in named], depth
            elif title.strip().lower() == "top level":
                sections, level = [""], depth
            elif sections is None or depth <= level:
                sections = None
            continue
        cells = _table_cells(line)
        if sections is None or not cells or cells[0].lower() == "field":
            continue
        for name in _code_spans(cells[0]):
            found |= {section + name for section in sections}
    return found


def _matches(documented: str, schema: set[str]) -> bool:
    """Whether a documented name is a real field; a concrete dict key such as
    `agents.defaults` stands for `*`."""
    return any(
        re.fullmatch(re.escape(name).replace(r"\*", r"[^.]+"), documented) for name in schema
    )


def test_every_configuration_field_is_documented() -> None:
    documented = documented_config_fields(_read(DOCS / "configuration.md"))
    missing = sorted(config_fields(Settings) - documented)
    assert not missing, f"docs/configuration.md does not document: {', '.join(missing)}"


def test_every_documented_configuration_field_exists() -> None:
    schema = config_fields(Settings)
    documented = documented_config_fields(_read(DOCS / "configuration.md"))
    stale = sorted(name for name in documented if not _matches(name, schema))
    assert not stale, f"docs/configuration.md documents fields that do not exist: {stale}"


def test_the_field_walk_reaches_nested_and_dict_sections() -> None:
    class Inner(BaseModel):
        depth: int = 1

    class Entry(BaseModel):
        inner: Inner | None = None
        size: int = 0

    class Root(BaseModel):
        top: str = ""
        section: Inner = Inner()
        named: dict[str, Entry] = {}

    assert config_fields(Root) == {
        "top",
        "section.depth",
        "named.*.inner.depth",
        "named.*.size",
    }
    fields = config_fields(Settings)
    assert {"data_dir", "lifecycle.semantic.threshold", "models.*.provider"} <= fields
    assert "agents.*.model" in fields and "lifecycle.semantic" not in fields


def test_the_configuration_reader_follows_headings_and_placeholders() -> None:
    text = """
## Top level

| field | default | meaning |
|---|---|---|
| `data_dir` | `./data` | |

## `[models.<name>]`

| field | default | meaning |
|---|---|---|
| `provider` | `offline` | |

```toml
# not a heading
[limits]
```

## `[agents.defaults]` and `[agents.<name>]`

| `model` | | |

### Notes

| `memory_window` | | |

## Elsewhere

| `ignored` | | |
"""
    assert documented_config_fields(text) == {
        "data_dir",
        "models.*.provider",
        "agents.defaults.model",
        "agents.*.model",
        "agents.defaults.memory_window",
        "agents.*.memory_window",
    }
    assert _matches("agents.defaults.model", {"agents.*.model"})
    assert not _matches("agents.defaults.nothing", {"agents.*.model"})


# --- 2. modules ------------------------------------------------------------------------


@dataclass
class ModuleTree:
    files: dict[str, str] = field(default_factory=dict)  # path -> description
    directories: set[str] = field(default_factory=set)


def module_tree(text: str) -> ModuleTree:
    """The tree in the code block that starts with `src/sessiongate/`: paths relative to
    src/sessiongate/, directories ending in "/"."""
    tree = ModuleTree()
    for block in _fenced_blocks(text):
        lines = [line for line in block if line.strip()]
        if not lines or lines[0].strip() != "src/sessiongate/":
            continue
        tree.directories.add("")
        stack: list[tuple[int, str]] = [(-1, "")]
        for line in lines[1:]:
            indent = len(line) - len(line.lstrip(" "))
            name, _, description = line.strip().partition(" ")
            if not name.endswith(("/", ".py")):
                continue  # a description's continuation line
            while stack[-1][0] >= indent:
                stack.pop()
            path = stack[-1][1] + name
            if name.endswith("/"):
                tree.directories.add(path)
                stack.append((indent, path))
            else:
                tree.files[path] = description.strip()
    return tree


def source_modules() -> set[str]:
    return {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}


def test_every_module_is_in_the_architecture_tree() -> None:
    tree = module_tree(_read(DOCS / "architecture.md"))
    assert tree.directories, "docs/architecture.md has no code block starting src/sessiongate/"
    missing = []
    for module in sorted(source_modules()):
        directory, _, name = module.rpartition("/")
        if name == "__init__.py":
            if (directory + "/" if directory else "") not in tree.directories:
                missing.append(module)
        elif module not in tree.files:
            missing.append(module)
    assert not missing, f"docs/architecture.md's tree does not name: {', '.join(missing)}"
    undescribed = sorted(path for path, description in tree.files.items() if not description)
    assert not undescribed, f"docs/architecture.md names without describing: {undescribed}"


def test_every_module_in_the_architecture_tree_exists() -> None:
    tree = module_tree(_read(DOCS / "architecture.md"))
    gone = sorted(p for p in [*tree.files, *tree.directories] if not (PACKAGE / p).exists())
    assert not gone, f"docs/architecture.md's tree names what is not in src/sessiongate/: {gone}"


def test_the_tree_reader_nests_by_indentation() -> None:
    text = """
```
src/sessiongate/
  store/       persistence
    base.py        the ports
    migrations/    SQL
                   (sqlite/0001_initial.sql …)
    sqlite.py      the adapter
  config.py    settings
```
"""
    tree = module_tree(text)
    assert tree.directories == {"", "store/", "store/migrations/"}
    assert tree.files == {
        "store/base.py": "the ports",
        "store/sqlite.py": "the adapter",
        "config.py": "settings",
    }


# --- 3. commands -----------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    invocation: str  # "sessiongate sessions show"
    words: tuple[str, ...]  # what its row must mention: "--owner", "KEY", …


def cli_commands(command: Any = None, path: str = "sessiongate") -> list[Command]:
    """Every runnable command of the typer app, through click's command tree."""
    if command is None:
        command = typer.main.get_command(app)
    subcommands = getattr(command, "commands", None)
    if subcommands is not None:  # a group
        return [
            found
            for name, sub in sorted(subcommands.items())
            if not getattr(sub, "hidden", False)
            for found in cli_commands(sub, f"{path} {name}")
        ]
    words = []
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            words.append(param.name.upper())
        else:
            longs = [o for o in param.opts if o.startswith("--")] or list(param.opts)
            words.append(longs[0])
    return [Command(path, tuple(words))]


def command_rows(text: str) -> dict[str, str]:
    """README's command table: the invocation in each row's first cell -> the whole row."""
    rows: dict[str, str] = {}
    in_section = False
    for _, line in _outside_fences(text):
        heading = _HEADING.match(line)
        if heading:
            in_section = heading.group(2).strip().lower() == "commands"
            continue
        cells = _table_cells(line)
        if not in_section or not cells:
            continue
        spans = _code_spans(cells[0])
        if spans and spans[0].startswith("sessiongate"):
            invocation = re.match(r"sessiongate(?: [a-z][a-z0-9_-]*)*", spans[0])
            assert invocation is not None
            rows[invocation.group(0)] = line
    return rows


def test_every_command_is_in_the_readme_table() -> None:
    rows = command_rows(_read(ROOT / "README.md"))
    problems = []
    for command in cli_commands():
        row = rows.get(command.invocation)
        if row is None:
            problems.append(f"no row for `{command.invocation}`")
            continue
        for word in command.words:
            if not re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", row):
                problems.append(f"`{command.invocation}`'s row does not mention {word}")
    assert not problems, "README.md's command table: " + "; ".join(problems)


def test_every_command_in_the_readme_table_exists() -> None:
    known = {command.invocation for command in cli_commands()}
    stale = sorted(set(command_rows(_read(ROOT / "README.md"))) - known)
    assert not stale, f"README.md's command table names commands that do not exist: {stale}"


def test_the_command_walk_reaches_subcommands_and_their_parameters() -> None:
    commands = {c.invocation: c for c in cli_commands()}
    assert "sessiongate serve" in commands and "sessiongate config check" in commands
    assert "sessiongate config" not in commands  # a group is covered by its commands
    show = commands["sessiongate sessions show"]
    assert "KEY" in show.words and "--config" in show.words


# --- 4. links --------------------------------------------------------------------------

_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s)]*)[^)]*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")
_AUTOLINK = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+\.\w+)>")
_BARE_URL = re.compile(r"(?<![\w/])(?:https?://|www\.)[^\s<>]*", re.IGNORECASE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line number, target) of every link outside code."""
    for number, line in _outside_fences(text):
        prose = _CODE_SPAN.sub("", line)
        for match in _INLINE_LINK.finditer(prose):
            yield number, match.group(1).strip("<>")
        reference = _REFERENCE.match(prose)
        if reference:
            yield number, reference.group(1).strip("<>")
        for match in _AUTOLINK.finditer(prose):
            yield number, match.group(1)
        stripped = _INLINE_LINK.sub("", _AUTOLINK.sub("", prose))
        if not reference:
            for match in _BARE_URL.finditer(stripped):
                yield number, match.group(0).rstrip(".,:;!?)")


def github_slugs(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _outside_fences(text):
        heading = _HEADING.match(line)
        if not heading:
            continue
        title = _CODE_SPAN.sub(lambda m: m.group(2), heading.group(2))
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    return slugs


def link_problem(source: Path, target: str, root: Path = ROOT) -> str | None:
    """Why a link in `source` is not allowed, or None when it is."""
    if _SCHEME.match(target) or target.lower().startswith("www.") or "@" in target:
        return "points outside the repository (write it as plain text)"
    path_part, _, anchor = target.partition("#")
    if path_part.startswith("/"):
        return "is an absolute path (use a path relative to the file)"
    resolved = (source.parent / path_part).resolve() if path_part else source.resolve()
    if not resolved.is_relative_to(root.resolve()):
        return "leaves the repository"
    if not resolved.exists():
        return "names a path that does not exist"
    if (
        anchor
        and resolved.suffix == ".md"
        and resolved.is_file()
        and anchor not in github_slugs(resolved.read_text(encoding="utf-8"))
    ):
        return f"names an anchor #{anchor} that no heading of {resolved.name} has"
    return None


def test_every_doc_link_stays_inside_the_repository() -> None:
    problems = []
    for path in _markdown_files():
        for number, target in links(_read(path)):
            problem = link_problem(path, target)
            if problem:
                problems.append(f"{path.relative_to(ROOT)}:{number}: {target} {problem}")
    assert not problems, "\n".join(problems)


def test_the_link_checker_refuses_what_it_should(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Sessions\n\n## The `[limits]` table\n")
    doc = tmp_path / "docs" / "a.md"
    doc.write_text("# A\n")
    text = """
See [the readme](../README.md#sessions), [limits](../README.md#the-limits-table), [here](#a),
![diagram](a.md) and [ref].

[ref]: ../README.md
[site]: https://example.org
An [external](https://example.org/x "title"), <https://example.org>, <me@example.org>,
http://bare.example.org, [root](/etc/passwd), [up](../../outside.md), [gone](b.md),
[bad anchor](../README.md#nothing).
`[in code](https://ignored.example.org)`
```
[in a fence](https://ignored.example.org)
```
"""
    found = [target for _, target in links(text)]
    assert not [t for t in found if "ignored" in t]
    verdicts = {target: link_problem(doc, target, root=tmp_path) for target in found}
    assert {t for t, problem in verdicts.items() if problem is None} == {
        "../README.md",
        "../README.md#sessions",
        "../README.md#the-limits-table",
        "#a",
        "a.md",
    }
    assert {t for t, problem in verdicts.items() if problem is not None} == {
        "https://example.org",
        "https://example.org/x",
        "me@example.org",
        "http://bare.example.org",
        "/etc/passwd",
        "../../outside.md",
        "b.md",
        "../README.md#nothing",
    }
