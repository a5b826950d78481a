"""Command-line pieces every relserve tool shares (torch-free, so a bad argument fails at once)."""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from typing import Any

from models.torch_support import installed_torch, torch_problem


class OneLineErrors(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line ``prog: error: ...`` and exit 2, no usage block.

    Parsing also checks the installed torch against the tested range, so a tool on an untested
    torch stops with one line before it imports torch (or fails deep inside ``torch.compile``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelp)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: Any = None) -> tuple[argparse.Namespace, list[str]]:
        parsed = super().parse_known_args(args, namespace)
        problem = torch_problem(installed_torch())
        if problem is not None:
            self.error(problem)
        return parsed


class DefaultsHelp(argparse.HelpFormatter):
    """``--help`` ends each option's line with its default, ``(default: X)``, unless the line already
    says it or there is none to say (``None``, a flag's ``False``); an option without help text
    gets a line with just its default."""

    def _format_action(self, action: argparse.Action) -> str:
        if not action.help and _has_default(action):
            action = copy.copy(action)
            action.help = "(default: %(default)s)"
        return super()._format_action(action)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "default" in text or not _has_default(action):
            return action.help
        return f"{text} (default: %(default)s)"


def _has_default(action: argparse.Action) -> bool:
    default = action.default  # identity: 0 is a default to show, though 0 == False
    return bool(action.option_strings) and not (default is None or default is False
                                                or default == argparse.SUPPRESS)


AUTO = "auto"
"""How a command line spells "let the tool choose" (``None`` in the dataclass behind it)."""


def count_or_auto(value: str) -> int | None:
    """An option's whole number, or ``auto`` (``None``: the tool chooses); the config's dataclass
    checks the range, so its error names the range.

    Raises:
        argparse.ArgumentTypeError: neither (shown as one line by :class:`OneLineErrors`).
    """
    if value == AUTO:
        return None
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number or {AUTO}, got {value!r}") from None


def add_threads_option(parser: argparse.ArgumentParser, auto: str) -> None:
    """``--threads N|auto`` (default ``auto``), parsed by :func:`count_or_auto`.

    Args:
        parser: the tool's parser.
        auto: what ``auto`` picks, for ``--help`` (e.g. "every core this process may use").
    """
    parser.add_argument("--threads", type=count_or_auto, default=None, metavar="N|auto",
                        help=f"torch threads (default: auto, {auto})")


class CliError(Exception):
    """A command cannot go on: the message is the one line shown, ``exit_code`` the status.

    Args:
        message: what is wrong, in one line.
        exit_code: the process's exit status (2: the user's arguments or paths; 1: anything else).
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def report(self, prog: str) -> int:
        """Print ``prog: error: message`` on stderr; returns :attr:`exit_code` (for ``main`` to return)."""
        print(f"{prog}: error: {self}", file=sys.stderr)
        return self.exit_code
