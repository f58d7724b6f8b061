"""The command's Rich consoles: on a terminal as wide as the terminal; where the output is not
a terminal (a pipe, a file, a CI log) and `COLUMNS` does not say otherwise, as wide as each
line's content, so tables and long URIs are never wrapped at Rich's default of 80 columns
(a rule, which would fill the whole width, stays 80 columns long)."""

from __future__ import annotations

from typing import Any

from rich.console import Console as RichConsole
from rich.console import ConsoleDimensions
from rich.rule import Rule

UNWRAPPED_WIDTH = 4096  # wider than any table the command prints
RULE_WIDTH = 80


class Console(RichConsole):
    @property
    def unwrapped(self) -> bool:
        """Not a terminal, and neither the caller nor `COLUMNS` set a width."""
        return self._width is None and not self.is_terminal and not self._environ.get("COLUMNS")

    @property
    def size(self) -> ConsoleDimensions:
        dims = RichConsole.size.fget(self)  # type: ignore[attr-defined]
        if self.unwrapped:
            return ConsoleDimensions(UNWRAPPED_WIDTH, dims.height)
        return dims

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        RichConsole.size.fset(self, new_size)  # type: ignore[attr-defined]

    def rule(self, title: Any = "", **kwargs: Any) -> None:
        if not self.unwrapped:
            return super().rule(title, **kwargs)
        self.print(Rule(title, **kwargs), width=RULE_WIDTH)


__all__ = ["Console", "RULE_WIDTH", "UNWRAPPED_WIDTH"]
