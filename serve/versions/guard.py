"""The deployment guard: which model version may be promoted without someone asking for it.

A version is *not* promoted automatically (at start-up, or by the repository poller) when

* its ``metrics.json`` says it does not beat its baselines on validation (``beats_baselines``), or
* it is worse than the serving version on the same validation week: both were trained on the same
  snapshot (same fingerprint, so the same weekly split) with as many validation rows, and its
  validation primary metric is worse. Versions trained on other data are not comparable this way.

A version without a readable ``metrics.json`` cannot be judged and is not held back. ``--force`` at
start-up and ``force=true`` on ``POST /admin/models/{task}/load`` override the guard; a pinned
version (``--model-version``) is an explicit choice, served with a warning if the guard objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from models.runtime.quality import MODEL, baseline_warning
from serve.versions.repository import ModelVersion, RepositoryError


@dataclass(frozen=True)
class Verdict:
    """Whether a version may be promoted automatically, and if not, why (one line)."""

    promote: bool
    reason: str = ""


def _validation(version: ModelVersion) -> tuple[str, bool, float] | None:
    document = version.metrics()
    try:
        primary = document["primary"]
        return primary, bool(document["higher_is_better"]), float(document["val"][MODEL][primary])
    except (TypeError, KeyError, ValueError):
        return None


def comparable(candidate: ModelVersion, serving: ModelVersion) -> bool:
    """Whether both versions were validated on the same week and rows: the same training snapshot
    (fingerprint) and the same number of validation rows."""
    a, b = candidate.config() or {}, serving.config() or {}
    rows = [(c.get("training") or {}).get("val_rows") if isinstance(c.get("training"), dict) else None
            for c in (a, b)]
    return bool(a.get("fingerprint")) and a.get("fingerprint") == b.get("fingerprint") and rows[0] == rows[1]


def judge(candidate: ModelVersion, serving: ModelVersion | None) -> Verdict:
    """The guard's verdict on promoting ``candidate`` over ``serving`` (``None``: nothing serves yet)."""
    document = candidate.metrics()
    if document is None:
        return Verdict(True)
    try:
        lost = baseline_warning(document)
    except (KeyError, TypeError, ValueError):
        lost = None
    if lost:
        detail = lost.split(": ", 1)[-1]
        return Verdict(False, f"version {candidate.version} does not beat its baselines on validation "
                              f"({detail})")
    if serving is None or serving.version == candidate.version or not comparable(candidate, serving):
        return Verdict(True)
    mine, theirs = _validation(candidate), _validation(serving)
    if mine is None or theirs is None or mine[0] != theirs[0]:
        return Verdict(True)
    primary, higher_is_better, value = mine
    worse = value < theirs[2] if higher_is_better else value > theirs[2]
    if worse:
        return Verdict(False, f"version {candidate.version} is worse than the serving version "
                              f"{serving.version} on the same validation week ({primary} {value:.4f} vs "
                              f"{theirs[2]:.4f})")
    return Verdict(True)


@dataclass
class Choice:
    """The version a task starts with, and what the guard said about the others.

    Args:
        version: the version to serve.
        held_back: version -> why it was not promoted (guard) or cannot be served (broken).
        warning: one line for the start-up log (``None``: nothing to say).
    """

    version: ModelVersion
    held_back: dict[int, str] = field(default_factory=dict)
    warning: str | None = None


def choose(versions: list[ModelVersion], check: Callable[[ModelVersion], str | None], pin: int | None = None,
           force: bool = False) -> Choice:
    """The version a task starts with.

    Unpinned, the versions are replayed oldest first as the poller would have met them: each one the
    guard allows replaces the one serving. A version that fails ``check`` (it cannot be loaded) is
    skipped. If the guard allows none, the newest loadable version serves, with a warning.

    Args:
        versions: the task's versions, oldest first (:func:`serve.versions.repository.task_versions`).
        check: loads a version; returns why it cannot be served, or ``None``.
        pin: serve this version (``--model-version``).
        force: ignore the guard (``--force``).

    Raises:
        RepositoryError: no version, a pinned version that does not exist or cannot be loaded, or
            no loadable version at all.
    """
    if not versions:
        raise RepositoryError("no version to serve")
    task = versions[0].task
    if pin is not None:
        chosen = next((v for v in versions if v.version == pin), None)
        if chosen is None:
            raise RepositoryError(f"--model-version {task}={pin}: no such version "
                                  f"(have {', '.join(str(v.version) for v in versions)})")
        problem = check(chosen)
        if problem:
            raise RepositoryError(f"--model-version {task}={pin}: {problem}")
        return Choice(chosen)  # an explicit choice: quality_warnings() says if it loses to a baseline
    broken: dict[int, str] = {}
    problems: dict[int, str] = {}
    while True:
        usable = [v for v in versions if v.version not in broken]
        serving: ModelVersion | None = None
        refused: dict[int, str] = {}
        for version in usable:
            verdict = Verdict(True) if force else judge(version, serving)
            if verdict.promote:
                serving = version
            else:
                refused[version.version] = verdict.reason
        for candidate in [serving] if serving is not None else list(reversed(usable)):
            problem = check(candidate)
            if problem is None:
                held_back = {v: why for v, why in {**refused, **broken}.items() if v != candidate.version}
                warning = None if serving is not None or len(versions) == 1 else (
                    f"{task}: no version passes the deployment guard; serving the newest that loads, "
                    f"version {candidate.version}")
                return Choice(candidate, held_back, warning)
            broken[candidate.version] = f"cannot be served: {problem}"
            problems[candidate.version] = problem
            if serving is not None:
                break  # replay the versions without it
        else:
            newest = max(problems)
            if len(versions) == 1:
                raise RepositoryError(problems[newest])
            raise RepositoryError(f"no version loads (version {newest}: {problems[newest]})")
