"""Command-line pieces every relserve tool shares (torch-free, so a bad argument fails at once)."""

from __future__ import annotations

import argparse


class OneLineErrors(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line ``prog: error: ...`` and exit 2, no usage block."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")
