"""Does a trained model beat its baselines? Read from a bundle's ``metrics.json`` by training and serving."""

from __future__ import annotations

from typing import Any

MODEL = "model"


def beats_baselines(primary: str, higher_is_better: bool, split: dict[str, Any]) -> bool:
    """Whether the model's primary metric is strictly better than every baseline's on ``split``."""
    model = split[MODEL][primary]
    others = [m[primary] for m in split["baselines"].values()]
    return all(model > o if higher_is_better else model < o for o in others)


def baseline_warning(document: dict[str, Any]) -> str | None:
    """One line saying the model does not beat the best baseline on validation, or ``None`` if it does.

    ``document`` is a ``metrics.json`` (so the server can say the same from a bundle)."""
    if document.get("beats_baselines", True):
        return None
    primary, val = document["primary"], document["val"]
    pick = max if document["higher_is_better"] else min
    name, best = pick(((n, m[primary]) for n, m in val["baselines"].items()), key=lambda item: item[1])
    return (f"the {document['task']} model does not beat the best baseline on validation: "
            f"{primary} {val[MODEL][primary]:.4f} vs {name} {best:.4f}")
