"""How pytest-xdist shares the suite between its workers (``-n 2 --dist loadgroup``, pyproject.toml).

A work unit is a whole test module, so a module's fixtures start once and its tests run in their
order (several modules rely on it). Every module that uses the session's ``server``
(tests/integration/conftest.py, which compiles every bucket of every task) joins one unit, so that
server starts once. Modules with ``slow`` tests are handed out first: no long module starts last
while the other worker has nothing left to do.

Only the workers collect, and only the controller schedules: each worker writes the modules' groups
to the file named by :data:`GROUPS_ENV` (set by the controller before the workers start), which
:class:`ModuleGroupScheduling` reads. (xdist's own ``loadgroup`` reads ``xdist_group`` marks through
node ids it rewrites, which pytest 9 no longer lets it do; no test of this suite uses those marks.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPS_ENV = "RELSERVE_TEST_XDIST_GROUPS"
SESSION_SERVER = "session-server"


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def uses_session_server(item: pytest.Item) -> bool:
    """Whether ``item`` needs the session ``server`` (some modules define a module-scoped ``server`` of
    their own, which does not count)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs.get("server", ()) if info is not None else ()
    return bool(definitions) and definitions[-1].scope == "session"


def order_and_record(items: list[pytest.Item]) -> None:
    """On a worker: sort ``items`` with modules of slow tests first (a stable sort: every module keeps its
    order; every worker sorts alike, as xdist needs) and write each module's group to the file."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(module_of(item.nodeid), []).append(item)
    slow = [m for m, its in modules.items() if any(it.get_closest_marker("slow") for it in its)]
    rank = {module: i for i, module in enumerate(slow)}
    items.sort(key=lambda item: rank.get(module_of(item.nodeid), len(rank)))
    groups = {m: SESSION_SERVER if any(uses_session_server(it) for it in its) else m
              for m, its in modules.items()}
    path = Path(os.environ[GROUPS_ENV])
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(groups))
    partial.replace(path)  # whole: the workers write the same groups


class ModuleGroupScheduling(LoadScopeScheduling):
    """xdist's load-by-scope scheduling, a scope being a module's group (module docstring)."""

    _groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            path = Path(os.environ.get(GROUPS_ENV, "/nonexistent"))
            self._groups = json.loads(path.read_text()) if path.is_file() else {}
        module = module_of(nodeid)
        return self._groups.get(module, module)
