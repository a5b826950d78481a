"""Progress bars on a terminal only.

tqdm redraws a bar with ``\\r`` several times a second. On a terminal each redraw overwrites the
last; in a file or a pipe (a log, CI, ``docker logs``) every one stays, thousands of lines' worth.
Every bar in relserve comes from :func:`progress_bar`, which draws only when its stream is a
terminal; where a bar was the only report of a long loop, the loop prints a plain line instead
when :func:`on_terminal` is false (the training epochs do).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import IO, Any

from tqdm import tqdm


def on_terminal(stream: IO[str] | None = None) -> bool:
    """Whether ``stream`` (default: the current ``sys.stderr``) is a terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced by an object without isatty, or closed
        return False


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, **kwargs: Any) -> tqdm:
    """A tqdm bar that draws only when ``enabled`` and its stream is a terminal.

    Otherwise the bar is disabled: it iterates, counts and closes like a bar but writes nothing,
    so callers use it the same way in both cases.

    Args:
        iterable: what to iterate over, as for :class:`tqdm.tqdm`.
        enabled: ``False`` for never (``--quiet``).
        **kwargs: passed to :class:`tqdm.tqdm` (``total``, ``desc``, ``unit``, ``file``, ...).
    """
    show = enabled and on_terminal(kwargs.get("file"))
    return tqdm(iterable, disable=not show, **kwargs)
