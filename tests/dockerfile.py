"""A Dockerfile read as Docker reads it: instructions, their flags, exec or shell form, build variables
expanded, and the shell commands of a ``RUN`` split into argument lists.

Enough of the reference's rules for the project's Dockerfile: the ``# escape=`` parser directive,
comment lines (also inside a continued instruction), line continuations, ``--flag=value`` options
before the arguments, JSON arrays (exec form), ``ARG``/``ENV`` values, ``$NAME``, ``${NAME}``,
``${NAME:-word}`` and ``${NAME:+word}``.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

DIRECTIVE = re.compile(r"^#\s*(\w+)\s*=\s*(\S+)\s*$")
FLAG = re.compile(r"--([a-z-]+)=(\S+)")
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::([-+])((?:[^{}]|\{[^{}]*\})*))?\}|(\w+))")
SHELL_OPERATORS = {"&&", "||", ";", "|", "&", ";;"}
SHELL_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "!"}


@dataclass(frozen=True)
class Instruction:
    """One instruction.

    Args:
        keyword: upper-case (``RUN``, ``COPY``, ...).
        text: the arguments after the flags, continuation lines joined by a space.
        flags: the ``--name=value`` options before the arguments (``COPY --chown``, ``HEALTHCHECK``'s).
        line: 1-based line where the instruction starts.
    """

    keyword: str
    text: str
    flags: dict[str, str] = field(default_factory=dict)
    line: int = 0

    @property
    def exec_form(self) -> list[str] | None:
        """The arguments as a JSON array of strings, or ``None`` for the shell form."""
        if not self.text.startswith("["):
            return None
        try:
            value = json.loads(self.text)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None

    @property
    def command(self) -> Instruction:
        """``HEALTHCHECK``'s own ``CMD`` instruction."""
        assert self.keyword == "HEALTHCHECK", self.keyword
        return parse(self.text)[0]


def parse(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile's ``text``, in order."""
    lines = text.splitlines()
    escape = "\\"
    for line in lines:  # parser directives: only at the very top
        match = DIRECTIVE.match(line)
        if not match:
            break
        if match.group(1).lower() == "escape":
            escape = match.group(2)
    instructions, parts, start = [], [], 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not parts):
            continue  # a comment, also between the lines of a continued instruction
        if not parts:
            start = number
        continued = stripped.endswith(escape)
        parts.append(stripped[:-1].strip() if continued else stripped)
        if not continued:
            instructions.append(_instruction(" ".join(p for p in parts if p), start))
            parts = []
    if parts:
        instructions.append(_instruction(" ".join(p for p in parts if p), start))
    return instructions


def _instruction(joined: str, line: int) -> Instruction:
    keyword, _, rest = joined.partition(" ")
    flags = {}
    rest = rest.strip()
    while match := FLAG.match(rest):
        flags[match.group(1)] = match.group(2)
        rest = rest[match.end():].strip()
    return Instruction(keyword.upper(), rest, flags, line)


def expand(text: str, variables: dict[str, str]) -> str:
    """``text`` with the build's variables substituted (unset ones are empty), as Docker does for
    ``FROM``/``COPY``/``ENV`` and the shell does for ``RUN``."""

    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(4)
        current = variables.get(name, "")
        operator, word = match.group(2), match.group(3)
        if operator == "-":
            return current or expand(word, variables)
        if operator == "+":
            return expand(word, variables) if current else ""
        return current

    return VARIABLE.sub(value, text)


def variables_used(text: str) -> set[str]:
    """Names of the variables ``text`` refers to (also inside a ``${NAME:+word}``'s word)."""
    names = set()
    for match in VARIABLE.finditer(text):
        names.add(match.group(1) or match.group(4))
        names |= variables_used(match.group(3) or "")
    return names


def assignments(text: str) -> dict[str, str]:
    """``ARG name[=default]`` or ``ENV k=v k2="v 2"`` arguments as a mapping (no default: ``""``)."""
    pairs = (word.partition("=") for word in shlex.split(text))
    return {name: value for name, _, value in pairs}


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a shell ``script`` as argument lists (quotes removed), split at
    ``&&``, ``||``, ``;`` and pipes, with ``if``/``then``/``fi``-style keywords dropped."""
    lexer = shlex.shlex(script, posix=True, punctuation_chars="&|;<>")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    redirected = False
    for token in lexer:
        if redirected:  # the target of a redirection is no argument
            redirected = False
        elif token in SHELL_OPERATORS:
            commands.append([])
        elif token[0] in "<>":
            redirected = True
            if commands[-1] and commands[-1][-1].isdigit():  # 2>&1: the descriptor is no argument
                commands[-1].pop()
        elif commands[-1] or token not in SHELL_KEYWORDS:
            commands[-1].append(token)
    return [c for c in commands if c]
