"""Every default is written once: the dataclasses hold it, ``--help`` shows it, and what README.md and
docs/ say about it agrees with both.

Docs state a default as ``(value)`` after an option (`` `--max-batch-size` (32) ``), ``(default value``,
`` `--opt value` (the default) `` or in a table whose second column is ``default``; every such
statement is compared with the default ``--help`` shows for that option, by the program the doc (or
the README's table row) is about. docs/decisions.md and docs/results.md are left out: they record
experiments, whose options are not defaults.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest

from loadtest.config import parse_args as loadtest_args
from models.graph.sampler import SamplerConfig
from models.nn.config import ModelConfig
from serve.config import parse_args as serve_args
from serve.ingest.config import IngestConfig
from serve.ingest.pacing import Pacer
from serve.score.cli import parse_args as score_args
from training.fit.config import RECIPES, FitConfig, TaskRecipe
from training.fit.config import parse_args as fit_args
from training.synth.cli import _parse_args as synth_args

REPO = Path(__file__).resolve().parents[2]
PROGRAMS: dict[str, Callable[[list[str]], object]] = {
    "serve": serve_args, "serve.score": score_args, "training.fit": fit_args,
    "training.synth": synth_args, "loadtest.run": loadtest_args,
}
# Which program a doc is about, first; an option none of them has is looked up in the others.
CONTEXT = {"docs/training.md": "training.fit", "docs/reproducibility.md": "training.fit",
           "docs/dataset-spec.md": "training.fit", "docs/data.md": "training.synth",
           "docs/monitoring.md": "loadtest.run"}
HISTORY = {"docs/decisions.md", "docs/results.md"}
UNITS = {None: 1.0, "s": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}
VALUE = r"(?:`[^`]+`|[0-9][0-9.,]*(?: [0-9][0-9.,]*)*)(?: ?(?:s|KiB|MiB|GiB))?"
MENTIONS = [
    re.compile(rf"`(--[a-z0-9-]+)(?: [^`]*)?` \(((?:default:? )?{VALUE})[);:, ]"),
    re.compile(r"`(--[a-z0-9-]+) ([^`]+)` \(the default"),
    re.compile(rf"`(--[a-z0-9-]+)(?: [A-Z]+)?`[a-z ]{{0,12}}\(default:? ({VALUE})"),
]
TABLE_ROW = re.compile(r"^\| `(--[a-z0-9-]+)(?: [^`]*)?` \| ([^|]+) \|")


def tokens(text: str) -> list[float | str]:
    """Numbers (units and thousands separators applied) and lower-case words of a stated value."""
    text = re.sub(r"(\d),(\d{3})", r"\1\2", text.replace("`", ""))
    out: list[float | str] = []
    for number, unit, word in re.findall(r"([0-9]+(?:\.[0-9]+)?)(?: ?(KiB|MiB|GiB|s)\b)?|([A-Za-z_]+)", text):
        out.append(float(number) * UNITS[unit or None] if number else word.lower())
    return out


@functools.cache
def help_defaults(program: str) -> dict[str, str]:
    """Option -> the default its ``--help`` line states (options stating none are absent)."""
    out, columns = io.StringIO(), os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "2000"  # one line per option's help
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            PROGRAMS[program](["--help"])
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    entries: dict[str, str] = {}
    options: list[str] = []
    for line in out.getvalue().splitlines():
        if line.startswith("  -"):
            invocation, _, text = line.strip().partition("  ")
            options = re.findall(r"--[a-z0-9-]+", invocation)
        else:
            text = line.strip() if options and line.startswith("    ") else ""
        found = re.search(r"default:? ([^;)]+)", text)
        if found:
            entries.update({option: found.group(1) for option in options})
    return entries


def statements() -> list[tuple[str, str, str, str]]:
    """``(where, program hint, option, stated value)`` of every default the docs state."""
    found = []
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        name = path.relative_to(REPO).as_posix()
        if name in HISTORY:
            continue
        table_default = False
        for number, line in enumerate(path.read_text().splitlines(), 1):
            row_program = re.match(r"\| `python -m ([a-z_.]+)", line)
            hint = row_program.group(1) if row_program else CONTEXT.get(name, "serve")
            if line.startswith("| option |"):
                table_default = line.split("|")[2].strip() == "default"
            elif not line.startswith("|"):
                table_default = False
            where = f"{name}:{number}"
            for pattern in MENTIONS:
                found.extend((where, hint, m.group(1), m.group(2)) for m in pattern.finditer(line))
            row = TABLE_ROW.match(line)
            if table_default and row:
                found.append((where, hint, row.group(1), row.group(2).strip()))
    return found


def shown_default(hint: str, option: str) -> str | None:
    for program in [hint, *PROGRAMS]:
        if program in PROGRAMS and option in help_defaults(program):
            return help_defaults(program)[option]
    return None


def test_every_default_the_docs_state_is_the_one_help_shows() -> None:
    checked, wrong = 0, []
    for where, hint, option, stated in statements():
        shown = shown_default(hint, option)
        if shown is None or re.match(r"(churn|sales|purchase) ", shown):
            continue  # no default (a required option), or one per task (the training.md table test)
        claimed = tokens(re.sub(r"^default:? ", "", stated))
        if not claimed or claimed[0] in ("none", "auto"):
            continue  # "none: never", "auto": no value to compare (help says the same in words)
        checked += 1
        if tokens(shown)[:len(claimed)] != claimed:
            wrong.append(f"{where}: {option} documented as {stated!r}, --help says {shown!r}")
    assert not wrong, "\n".join(wrong)
    assert checked >= 40, f"only {checked} documented defaults found: has the docs' notation changed?"


def training_table() -> dict[str, tuple[str, str]]:
    """docs/training.md's defaults table: name (``--option`` or field) -> (default, per task)."""
    rows = {}
    for line in (REPO / "docs/training.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`") and cells[0] != "`option`":
            rows[cells[0].strip("`")] = (cells[1], cells[2])
    return rows


def rendered(value: object, field: str) -> list[float | str]:
    if value is None:
        return ["auto"]
    if isinstance(value, bool):
        return [str(value).lower()]
    if isinstance(value, tuple):
        return [float(v) for v in value]
    return tokens(str(value))


def test_the_training_table_is_every_recipe_default_and_override() -> None:
    table = training_table()
    base = TaskRecipe()
    for field in fields(TaskRecipe):
        option = f"--{field.name.replace('_', '-')}"
        name = option if option in table else field.name
        assert name in table, f"docs/training.md's defaults table lacks {field.name}"
        default, per_task = table[name]
        assert tokens(default) == rendered(getattr(base, field.name), field.name), (name, default)
        overrides = {task: getattr(recipe, field.name) for task, recipe in RECIPES.items()
                     if getattr(recipe, field.name) != getattr(base, field.name)}
        stated = dict(re.findall(r"([a-z]+) ([^,]+)", per_task))
        assert {t: tokens(v) for t, v in stated.items()} == \
               {t: rendered(v, field.name) for t, v in overrides.items()}, (name, per_task)
    for field in fields(FitConfig):
        option = f"--{field.name.replace('_', '-')}"
        if option in table and field.name not in {f.name for f in fields(TaskRecipe)}:
            assert tokens(table[option][0]) == rendered(field.default, field.name), (option, table[option])


def test_training_trains_the_model_and_sampler_the_classes_default_to() -> None:
    recipe = TaskRecipe()
    assert recipe.model_config() == ModelConfig()
    assert (recipe.fanouts, recipe.per_day) == (SamplerConfig().fanouts, SamplerConfig().per_day)
    assert len(SamplerConfig().fanouts) == ModelConfig().num_layers


def test_the_pacer_defaults_to_the_servers_ingestion_settings() -> None:
    # The graph owner and the workers' key thread take every other setting from IngestConfig itself.
    assert Pacer(1.0).poll_s == IngestConfig(state_dir=Path(".")).poll_s


def test_automatic_is_none_in_python_and_auto_on_the_command_line(tmp_path: Path) -> None:
    required = ["--data", str(tmp_path), "--task", "churn", "--out", str(tmp_path / "out")]
    assert fit_args(required).threads is None and fit_args([*required, "--threads", "auto"]).threads is None
    assert fit_args([*required, "--threads", "2"]).threads == 2
    with pytest.raises(SystemExit):
        fit_args([*required, "--threads", "0"])  # once "torch's default"; now only auto says that
    served = serve_args(["--artifacts", str(tmp_path), "--threads", "auto", "--workers-per-task", "auto",
                         "--api-servers", "auto"])
    assert (served.threads, served.workers_per_task, served.api_servers) == (None, None, None)
    for program in ("training.fit", "serve.score", "serve"):
        assert help_defaults(program)["--threads"].startswith("auto"), program
