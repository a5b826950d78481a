"""The Dockerfile, read as Docker reads it (:mod:`tests.dockerfile`; CI builds no image and a build
needs the network) and checked against the project: the CMD parses with the server's own argument
parser, the ports agree, the copied paths exist and reach the build, torch is the Makefile's pin
installed first (from the chosen index), g++ is installed, the user is created and not root, the
venv is on the PATH; and the image carries the serving install only: models/ and serve/ less the
benchmarks, the base dependencies of pyproject.toml and no package of its ``train`` or ``dev`` extras.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from serve.config import parse_args
from tests.dockerfile import Instruction, assignments, expand, parse, shell_commands, variables_used

REPO = Path(__file__).resolve().parents[2]
PIP_VALUE_OPTIONS = {"-i", "--index-url", "--extra-index-url", "-r", "--requirement", "-c", "--constraint",
                     "-f", "--find-links", "-t", "--target"}


def instructions() -> list[Instruction]:
    return parse((REPO / "Dockerfile").read_text())


def only(keyword: str) -> list[Instruction]:
    return [i for i in instructions() if i.keyword == keyword]


def run_commands(**build_args: str) -> list[list[str]]:
    """Every shell command of every ``RUN``, in order, with the variables a build would see (the
    ``ARG`` defaults, ``build_args`` over them, and the ``ENV`` values)."""
    variables: dict[str, str] = {}
    commands = []
    for instruction in instructions():
        if instruction.keyword == "ARG":
            for name, default in assignments(instruction.text).items():
                variables[name] = build_args.get(name, default)
        elif instruction.keyword == "ENV":
            variables.update({k: expand(v, variables) for k, v in assignments(instruction.text).items()})
        elif instruction.keyword == "RUN":
            commands += shell_commands(expand(instruction.text, variables))
    return commands


def pip_installs(commands: list[list[str]]) -> list[tuple[list[str], dict[str, str]]]:
    """``(requirements, options with a value)`` of each ``pip install`` command."""
    installs = []
    for argv in commands:
        if argv[:2] != ["pip", "install"]:
            continue
        requirements, options, args = [], {}, iter(argv[2:])
        for arg in args:
            if arg in PIP_VALUE_OPTIONS:
                options[arg] = next(args)
            elif not arg.startswith("-"):
                requirements.append(arg)
        installs.append((requirements, options))
    return installs


def project_extras(requirement: str) -> set[str] | None:
    """The extras of a requirement that installs this project (``.``, ``.[redis]``); ``None``
    for any other requirement."""
    match = re.fullmatch(r"\.(?:\[([\w,\s-]*)\])?", requirement)
    if match is None:
        return None
    return {e.strip() for e in (match.group(1) or "").split(",") if e.strip()}


def optional_dependencies() -> dict[str, list[str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def cmd() -> list[str]:
    argv = only("CMD")[-1].exec_form
    assert argv is not None, "CMD in shell form: python would not be PID 1 and would miss SIGTERM"
    return argv


def test_the_parser_reads_directives_continuations_flags_and_both_forms() -> None:
    text = ("# escape=`\nFROM base\n# a comment\nRUN a `\n  # dropped inside the continuation\n  && b\n"
            'COPY --chown=app:app src /dst\nCMD ["x", "-y"]\n')
    steps = parse(text)
    assert [(s.keyword, s.text, s.line) for s in steps] == [
        ("FROM", "base", 2), ("RUN", "a && b", 4), ("COPY", "src /dst", 7), ("CMD", '["x", "-y"]', 8)]
    assert steps[2].flags == {"chown": "app:app"} and steps[3].exec_form == ["x", "-y"]
    assert steps[1].exec_form is None and shell_commands(steps[1].text) == [["a"], ["b"]]
    assert expand("${A:+--i $A} ${B:-b} $C", {"A": "u"}) == "--i u b "


def test_cmd_runs_the_serve_module_with_flags_it_accepts(tmp_path: Path) -> None:
    argv = cmd()
    assert argv[:3] == ["python", "-m", "serve"] and (REPO / "serve" / "__main__.py").is_file()
    assert argv[argv.index("--artifacts") + 1] == "/artifacts"
    # /artifacts exists in the container only: parse the CMD with a directory that exists here.
    local = [str(tmp_path) if a == "/artifacts" else a for a in argv[3:]]
    config = parse_args(local)  # an unknown flag or a bad value exits here
    assert (config.host, config.port) == ("0.0.0.0", 8000)


def test_exposed_port_matches_cmd_and_healthcheck(tmp_path: Path) -> None:
    port = parse_args([str(tmp_path) if a == "/artifacts" else a for a in cmd()[3:]]).port
    assert [e.text for e in only("EXPOSE")] == [str(port)]
    (check,) = only("HEALTHCHECK")
    assert int(check.flags["start-period"].removesuffix("s")) >= 300  # compiling precedes /health
    probe = check.command.exec_form
    assert probe is not None and probe[:2] == ["python", "-c"]  # the slim image has no curl
    calls = [n for n in ast.walk(ast.parse(probe[2])) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "urlopen"]
    (url,) = [urlsplit(c.args[0].value) for c in calls]
    assert url.hostname in ("127.0.0.1", "localhost") and (url.port, url.path) == (port, "/health")


def test_torch_is_the_makefiles_pin_installed_before_the_project_from_the_chosen_index() -> None:
    pin = re.search(r"^TORCH_PIN := (torch==\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE).group(1)
    default = pip_installs(run_commands())
    (torch, _), (project, _) = default  # torch first, then the project
    assert torch == [pin] and len(project) == 1 and project_extras(project[0]) is not None
    assert default[0][1] == {}  # no index given: pip's configured one
    chosen = pip_installs(run_commands(TORCH_INDEX_URL="https://example.invalid/whl/cpu"))
    assert chosen[0] == ([pin], {"--index-url": "https://example.invalid/whl/cpu"})


def test_build_arguments_are_declared_where_they_are_used() -> None:
    steps = instructions()
    first_from = next(i for i, s in enumerate(steps) if s.keyword == "FROM")
    before = {n for s in steps[:first_from] if s.keyword == "ARG" for n in assignments(s.text)}
    after = {n for s in steps[first_from:] if s.keyword in ("ARG", "ENV") for n in assignments(s.text)}
    for i, step in enumerate(steps):
        used = variables_used(step.text)
        declared = before if i <= first_from else after | {"PATH"}
        assert used <= declared, f"line {step.line}: {sorted(used - declared)} used but not declared"


def test_compiler_for_inductor_is_installed() -> None:
    installs = [argv for argv in run_commands() if argv[:2] == ["apt-get", "install"]]
    assert any("g++" in argv for argv in installs)


def test_the_venv_is_created_and_first_on_the_path() -> None:
    env = {k: v for s in only("ENV") for k, v in assignments(s.text).items()}
    venv = env["VIRTUAL_ENV"]
    assert env["PATH"].split(":")[0] in (f"{venv}/bin", "$VIRTUAL_ENV/bin", "${VIRTUAL_ENV}/bin")
    assert any(argv[1:] == ["-m", "venv", venv] for argv in run_commands())


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents decides (``*`` and
    ``?`` stay within a path segment, ``**`` spans any number of them, ``!`` re-includes)."""
    parts = Path(path).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        regex = _pattern_regex(pattern.lstrip("!").strip("/"))
        if any(regex.fullmatch(c) for c in candidates):
            ignored = not negated
    return ignored


def _pattern_regex(pattern: str) -> re.Pattern:
    translated = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*")
    return re.compile(translated.replace(r"\*", "[^/]*").replace(r"\?", "[^/]"))


def dockerignore_patterns() -> list[str]:
    return [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def copies() -> list[tuple[list[str], str]]:
    """``(sources, destination)`` of each ``COPY``, the destination made absolute by ``WORKDIR``."""
    result, workdir = [], "/"
    for step in instructions():
        if step.keyword == "WORKDIR":
            workdir = step.text
        elif step.keyword == "COPY":
            *sources, destination = step.exec_form or step.text.split()
            result.append((sources, str(Path(workdir, destination))))
    return result


def test_copied_paths_exist_and_reach_the_build() -> None:
    ignore = dockerignore_patterns()
    assert copies()
    for sources, _ in copies():
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: no such file"
            assert not dockerignored(source, ignore), f"COPY {source}: excluded by .dockerignore"
    for private in (".venv", ".git", "artifacts", "data", "serve/__pycache__/app.cpython-311.pyc"):
        assert dockerignored(private, ignore), f"{private} would be sent to the build"


def requirement_name(requirement: str) -> str:
    """``"torch_geometric>=2.6"`` -> ``"torch-geometric"`` (PEP 503 normalized, extras dropped)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)).lower()


def test_serving_dependencies_hold_no_training_or_dev_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = {requirement_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert "lightgbm" in {requirement_name(r) for r in extras["train"]}
    itself = [re.fullmatch(r"relserve\[([\w,\s-]*)\]", r) for r in extras["dev"]]
    assert any(m and "train" in m.group(1).replace(" ", "").split(",") for m in itself), \
        "the tests train: dev must hold the train extra"
    for extra in ("train", "dev"):
        overlap = base & {requirement_name(r) for r in extras[extra]}
        assert not overlap, f"{sorted(overlap)} of the {extra} extra are base (serving) dependencies"


@pytest.mark.parametrize("index", ["", "https://example.invalid/whl/cu128"])
def test_the_image_installs_the_serving_dependencies_only(index: str) -> None:
    requirements = [r for rs, _ in pip_installs(run_commands(TORCH_INDEX_URL=index)) for r in rs]
    (extras,) = [e for r in requirements if (e := project_extras(r)) is not None]
    assert [requirement_name(r) for r in requirements if project_extras(r) is None] == ["torch"]
    assert not extras & {"train", "dev"}, f"the image installs the {sorted(extras)} extras: serving only"
    declared = optional_dependencies()
    training = {requirement_name(r) for extra in ("train", "dev") for r in declared[extra]
                if not r.startswith("relserve")}
    for extra in extras:  # an extra the server uses (e.g. the Redis client) holds no training package
        assert extra in declared, f"the image installs .[{extra}], which pyproject.toml does not declare"
        assert not {requirement_name(r) for r in declared[extra]} & training, extra


def test_the_image_copies_models_and_serve_without_the_benchmarks() -> None:
    ignore = dockerignore_patterns()
    assert sorted(copies()) == [(["models"], "/app/models"), (["pyproject.toml"], "/app"),
                                (["serve"], "/app/serve")]
    assert dockerignored("serve/bench", ignore) and dockerignored("serve/bench/run.py", ignore)
    for shipped in ("serve/__main__.py", "serve/http/app.py", "serve/score/run.py", "models/registry.py"):
        assert not dockerignored(shipped, ignore), f"{shipped} would not reach the image"


def test_runs_as_a_user_it_creates_that_is_not_root() -> None:
    steps = instructions()
    users = [(i, s.text.partition(":")[0]) for i, s in enumerate(steps) if s.keyword == "USER"]
    assert users, "the image runs as root"
    last, user = users[-1]
    assert user not in ("root", "0")
    created = [(i, argv) for i, s in enumerate(steps) if s.keyword == "RUN" for argv in shell_commands(s.text)
               if argv[0] == "useradd" and argv[-1] == user]
    assert created, f"USER {user} is never created"
    (where, useradd), = created
    assert where < last and useradd[useradd.index("--uid") + 1] != "0"
    assert steps.index(only("CMD")[-1]) > last
