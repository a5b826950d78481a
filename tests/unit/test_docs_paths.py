"""Every repository path and module a doc or a docstring names exists.

Scans README.md, BENCHMARKS.md, docs/*.md, and the docstrings and comments of models/, serve/,
training/ and loadtest/ for
- paths under the repository's top-level folders (``training/tasks/metrics.py``, ``docs/ids.md``),
- top-level files (``BENCHMARKS.md``, ``Dockerfile``) and relative Markdown links (``[x](ids.md)``),
- relative paths that climb out of their document's folder (``../x/``): they must stay in the repository,
- dotted names of the project's modules and what they define (``python -m training.fit``,
  ``:class:`serve.ingest.pacing.Pacer```, ``models.runtime.inference.TaskInference.run_ids``),
and fails listing each that names nothing in the repository, with the file and line naming it.
Prose is told apart from names as :func:`checked_paths` and :func:`checked_modules` say.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "BENCHMARKS.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
CODE = ("models", "serve", "training", "loadtest")
FOLDERS = ("models", "serve", "training", "loadtest", "docs", "tests", "data", ".ci")
PACKAGES = ("models", "serve", "training", "loadtest", "tests")
# Not preceded by what would make it part of a longer path, a URL or a variable ($PWD/serve/...).
START = r"(?<![\w./$-])"
PATH = re.compile(START + r"((?:{})/[\w./*-]*[\w*])".format("|".join(re.escape(f) for f in FOLDERS)))
TOP_FILE = re.compile(START + r"([A-Z][A-Z_-]*\.md|Dockerfile|Makefile|pyproject\.toml)\b")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOTTED = re.compile(START + r"((?:{})(?:\.\w+)+)".format("|".join(PACKAGES)))
TRIPLE_QUOTED = re.compile(r'''("""|\'\'\')(.*?)\1''', re.DOTALL)
# A comment: from a # that follows an even number of quotes (not inside a string) to the line's end.
COMMENT = re.compile(r"""^(?:[^'"#]|'[^']*'|"[^"]*")*?(#.*)$""")
# A relative path climbing out of its document's folder (``../shared/x/``): checked to stay in the repository.
UPWARD = re.compile(r"(?<![\w./$-])((?:\.\./)+[\w.-][\w./*-]*)")
FILE_SUFFIX = re.compile(r"\.(py|md|toml|json|ya?ml|csv|txt|parquet|gz|log|png|html)$")


def sources() -> Iterator[tuple[str, int, str]]:
    """``(file, line, text)`` of every doc line, and of every comment and triple-quoted string
    (docstrings, help texts) of the code."""
    for name in DOCS:
        for number, line in enumerate((REPO / name).read_text().splitlines(), 1):
            yield name, number, line
    for folder in CODE:
        for path in sorted((REPO / folder).rglob("*.py")):
            name, text = str(path.relative_to(REPO)), path.read_text()
            for number, line in enumerate(text.splitlines(), 1):
                if (comment := COMMENT.search(line)) is not None:
                    yield name, number, comment.group(1)
            for string in TRIPLE_QUOTED.finditer(text):
                first = text.count("\n", 0, string.start()) + 1
                for offset, line in enumerate(string.group(2).splitlines()):
                    yield name, first + offset, line


@cache
def syntax_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


# What the Makefile generates (`make demo-data`): named by the docs, absent from a fresh clone.
GENERATED = ("data/demo",)


def path_exists(path: str) -> bool:
    path = path.rstrip(".")
    if any(path == g or path.startswith(g + "/") for g in GENERATED):
        return True
    if "*" in path:
        return any(REPO.glob(path))
    return (REPO / path).exists()


@cache
def module_file(dotted: str) -> Path | None:
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def names_defined(path: Path) -> dict[str, object]:
    """Top-level names of a module: a class maps to its node (to look its members up), a name
    imported from a project module to ``"module.name"``, anything else to ``None``."""
    names: dict[str, object] = {}
    for node in syntax_tree(path).body:
        names.update(_bound(node))
    return names


def _bound(node: ast.AST) -> dict[str, object]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name: node}
    if isinstance(node, ast.ImportFrom):
        return {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0]: None for a in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id: None for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.If, ast.Try)):
        found: dict[str, object] = {}
        for child in ast.iter_child_nodes(node):
            found.update(_bound(child))
        return found
    return {}


def resolve(module: Path, name: str) -> object:
    """What ``name`` is in ``module`` (following imports from project modules); ``False``: nothing."""
    found = names_defined(module).get(name, False)
    if isinstance(found, str) and found.split(".")[0] in PACKAGES:
        origin, _, attribute = found.rpartition(".")
        origin_file = module_file(origin)
        return resolve(origin_file, attribute) if origin_file else module_file(found) or False
    return found


def class_members(module: Path, node: ast.ClassDef) -> set[str]:
    """Names a class defines: its body, ``self.x = ...`` in its methods, and its project bases'."""
    members = set()
    for child in node.body:
        members |= set(_bound(child))
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store) \
                and isinstance(sub.value, ast.Name) and sub.value.id == "self":
            members.add(sub.attr)
    for base in node.bases:
        if isinstance(base, ast.Name) and isinstance(found := resolve(module, base.id), ast.ClassDef):
            origin = names_defined(module).get(base.id)
            base_module = module_file(origin.rpartition(".")[0]) if isinstance(origin, str) else module
            members |= class_members(base_module or module, found)
    return members


def dotted_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        node = resolve(path, rest[0])
        if node is False:
            return False
        if isinstance(node, ast.ClassDef) and len(rest) > 1:
            origin = names_defined(path).get(rest[0])
            home = module_file(origin.rpartition(".")[0]) if isinstance(origin, str) else path
            return rest[1] in class_members(home or path, node)
        return True  # a function, a value or an import from elsewhere: its attributes are not looked up
    return False


def checked_paths(text: str) -> list[str]:
    """Path-like words worth checking: with a file suffix, a trailing ``/``, two or more ``/``, or
    in backticks (``training/serving`` in prose is no path)."""
    found = []
    for match in PATH.finditer(text):
        path, after = match.group(1), text[match.end():match.end() + 1]
        before = text[match.start() - 1:match.start()] if match.start() else ""
        if FILE_SUFFIX.search(path) or after == "/" or path.count("/") >= 2 or "`" in (before, after):
            found.append(path)
    return found


def checked_modules(text: str) -> list[str]:
    """Dotted names worth checking: three parts or more (``training.tasks.metrics``), or two after
    ``python -m`` or a Sphinx role (``training.log_sequence`` is a key of config.json)."""
    found = []
    for match in DOTTED.finditer(text):
        dotted = match.group(1).rstrip(".")
        if FILE_SUFFIX.search(dotted):
            continue
        before = text[:match.start()]
        if dotted.count(".") >= 2 or re.search(r"(python -m\s+|:\w+:`~?)$", before):
            found.append(dotted)
    return found


def inside_repo(document: str, upward: str) -> bool:
    """Whether ``upward`` (``../x``), read from ``document``'s folder, names something in the repository."""
    target = ((REPO / document).parent / upward.rstrip(".")).resolve()
    return target.is_relative_to(REPO) and target.exists()


def missing() -> list[str]:
    problems = []
    for name, line, text in sources():
        found = [p for p in checked_paths(text) if not path_exists(p)]
        found += [f for f in TOP_FILE.findall(text) if not (REPO / f).exists()
                  and not (name.startswith("docs/") and (REPO / "docs" / f).exists())]
        if name.endswith(".md"):
            found += [link for link in LINK.findall(text) if not re.match(r"\w+:", link)
                      and not (REPO / name).parent.joinpath(link).exists()]
        found += [d for d in checked_modules(text) if not dotted_exists(d)]
        found += [up for up in UPWARD.findall(text) if not inside_repo(name, up)]
        problems += [f"{name}:{line}: {target}" for target in found]
    return list(dict.fromkeys(problems))


def test_every_path_and_module_named_in_the_docs_and_docstrings_exists() -> None:
    problems = missing()
    assert not problems, (
        f"{len(problems)} reference(s) in docs or docstrings name nothing in the repository "
        "(fix the name, or drop the reference; the repository must stand on its own):\n  "
        + "\n  ".join(problems))


def test_the_architecture_page_states_every_import_contract() -> None:
    """docs/architecture.md's contract table has, for each contract of pyproject.toml, a row naming
    each of its layers or forbidden modules (so a changed contract shows in the page)."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    page = (REPO / "docs" / "architecture.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    for contract in contracts:
        if contract["type"] == "layers":
            names = [n.strip() for layer in contract["layers"] for n in re.split(r"[|:]", layer)]
        elif contract["type"] == "forbidden":
            names = contract["forbidden_modules"]
        else:
            names = ["cycle"]
        shown = [row for row in rows if all(f"`{n}`" in row or (n == "cycle" and n in row) for n in names)]
        assert shown, f"docs/architecture.md has no row of the contract table naming all of {names} " \
                      f"(pyproject.toml's contract {contract['name']!r})"
