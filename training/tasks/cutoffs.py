"""Where the train, validation and test cutoffs fall on the calendar."""

from __future__ import annotations


def split_cutoffs(
    min_day: int,
    max_day: int,
    window_days: int = 7,
    min_history_days: int = 7,
    max_train_cutoffs: int = 0,
    weeks_back: int = 0,
) -> dict[str, list[int]]:
    """Cutoff days per split, oldest first.

    The test label window is the last full week of data: ``test = max_day - window_days``, so
    its labels cover ``max_day - 6 .. max_day``. Validation is the week before
    (``val = test - window_days``) and training cutoffs step back weekly from there
    (``val - 7, val - 14, ...``) as long as at least ``min_history_days`` days of data lie
    at or before the cutoff (``cutoff - min_day + 1 >= min_history_days``), so the churn
    entity week and the baselines' history are complete. Training label windows thus end
    exactly where validation's begin and never overlap the validation or test weeks.

    With ``weeks_back`` the test week moves that many windows earlier (``test = max_day -
    (1 + weeks_back) * window_days``) and everything else with it: one origin of a rolling-origin
    backtest. Nothing after the test week is labelled.

    Args:
        min_day: first transaction day.
        max_day: last transaction day.
        window_days: label window length.
        min_history_days: days of data required up to and including a cutoff.
        max_train_cutoffs: keep only this many most recent training cutoffs (``0``: all).
        weeks_back: windows to move the test week back from the last full one.

    Returns:
        ``{"train": [...], "val": [val], "test": [test]}``.

    Raises:
        ValueError: if the data is too short for at least one training cutoff.
    """
    if window_days < 1 or min_history_days < 1:
        raise ValueError("window_days and min_history_days must be >= 1")
    if max_train_cutoffs < 0:
        raise ValueError("max_train_cutoffs must be 0 (all) or more")
    if weeks_back < 0:
        raise ValueError("weeks_back must be >= 0")
    test = max_day - (1 + weeks_back) * window_days
    val = test - window_days
    first_allowed = min_day + min_history_days - 1
    train = list(range(val - window_days, first_allowed - 1, -window_days))[::-1]
    if not train:
        needed = (3 + weeks_back) * window_days + min_history_days
        back = f", then {weeks_back} more weeks after the test week" if weeks_back else ""
        raise ValueError(
            f"transactions span {max_day - min_day + 1} days; need at least {needed} "
            f"({min_history_days} of history, then train, val and test weeks of {window_days}{back})"
        )
    if max_train_cutoffs:
        train = train[-max_train_cutoffs:]
    return {"train": train, "val": [val], "test": [test]}
