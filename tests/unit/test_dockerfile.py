"""The Dockerfile, checked against the project (no Docker engine runs here, and CI builds no image).

Parses the instructions and checks what a build and a ``docker run`` would trip on: the CMD's
module and flags exist and parse, the ports agree, the copied paths exist and are not
dockerignored, torch is the Makefile's pin and installed first, g++ is there, the user is not root;
and that the image carries the serving install only: models/ and serve/ less the benchmarks, the
base dependencies of pyproject.toml and no package of its ``train`` or ``dev`` extras.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from serve.config import parse_args

REPO = Path(__file__).resolve().parents[2]


def instructions() -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of the Dockerfile, continuation lines joined, comments dropped."""
    text = (REPO / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            result.append((keyword.upper(), " ".join(rest.split())))
    return result


def arguments(keyword: str) -> list[str]:
    return [rest for k, rest in instructions() if k == keyword]


def exec_form(text: str) -> list[str]:
    value = json.loads(text)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), f"not exec form: {text}"
    return value


def cmd() -> list[str]:
    (last, *_) = reversed(arguments("CMD"))
    return exec_form(last)


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_cmd_runs_the_serve_module_with_flags_it_accepts(tmp_path: Path) -> None:
    argv = cmd()
    assert argv[:3] == ["python", "-m", "serve"]
    assert (REPO / "serve" / "__main__.py").is_file()
    help_text = subprocess.run([sys.executable, "-m", "serve", "--help"], capture_output=True, text=True,
                               cwd=REPO, timeout=120).stdout
    for option in (a for a in argv[3:] if a.startswith("--")):
        assert re.search(rf"(^|\s|\[){re.escape(option)}\b", help_text), f"python -m serve has no {option}"
    assert flag(argv, "--artifacts") == "/artifacts"
    # /artifacts exists in the container only: parse the CMD with a directory that exists here.
    local = list(argv)
    local[local.index("--artifacts") + 1] = str(tmp_path)
    config = parse_args(local[3:])
    assert (config.host, config.port) == ("0.0.0.0", 8000)


def test_exposed_port_matches_cmd_and_healthcheck() -> None:
    port = flag(cmd(), "--port")
    assert arguments("EXPOSE") == [port]
    (check,) = arguments("HEALTHCHECK")
    options, _, command = check.partition(" CMD ")
    assert "--start-period" in options
    probe = exec_form(command)
    assert probe[:2] == ["python", "-c"] and "urllib.request" in probe[2] and "curl" not in check
    assert re.search(rf"http://(127\.0\.0\.1|localhost):{port}/health\b", probe[2])
    compile(probe[2], "<healthcheck>", "exec")


def test_torch_is_the_makefiles_pin_and_installed_before_the_project() -> None:
    pin = re.search(r"^TORCH_PIN := torch==(\S+)$", (REPO / "Makefile").read_text(), re.MULTILINE).group(1)
    declared = dict(a.partition("=")[::2] for a in arguments("ARG"))
    assert declared["TORCH_VERSION"] == pin
    runs = arguments("RUN")
    torch_step = next(i for i, r in enumerate(runs) if '"torch==${TORCH_VERSION}"' in r)
    project_step = next(i for i, r in enumerate(runs) if re.search(r"pip install \.(\s|$)", r))
    assert torch_step < project_step
    assert "--index-url" in runs[torch_step] and "TORCH_INDEX_URL" in declared


def test_build_arguments_are_declared_where_they_are_used() -> None:
    steps = instructions()
    (base,) = [rest for k, rest in steps if k == "FROM"]
    first_from = next(i for i, (k, _) in enumerate(steps) if k == "FROM")
    before = {rest.partition("=")[0]: rest.partition("=")[2] for k, rest in steps[:first_from] if k == "ARG"}
    assert base == "${BASE_IMAGE}" and before["BASE_IMAGE"] == "python:3.11-slim"
    after = {rest.partition("=")[0] for k, rest in steps[first_from:] if k == "ARG"}
    used = set(re.findall(r"\$\{?([A-Z_]+)", " ".join(rest for k, rest in steps[first_from:] if k == "RUN")))
    environment = {"PATH", "VIRTUAL_ENV"}
    assert used - environment <= after, f"used in RUN, not declared after FROM: {used - environment - after}"


def test_compiler_for_inductor_is_installed() -> None:
    assert any(re.search(r"apt-get install [^&]*\bg\+\+", r) for r in arguments("RUN"))


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule, simplified: the last pattern matching the path or one of its parents decides."""
    parts = Path(path).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        bare = pattern.lstrip("!").rstrip("/")
        if any(fnmatch.fnmatch(c, bare) for c in candidates):
            ignored = not negated
    return ignored


def dockerignore_patterns() -> list[str]:
    return [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_copied_paths_exist_and_reach_the_build() -> None:
    ignore = dockerignore_patterns()
    copies = arguments("COPY")
    assert copies
    for copy in copies:
        *sources, _destination = [a for a in copy.split() if not a.startswith("--")]
        for source in sources:
            assert (REPO / source).exists(), f"COPY {source}: no such file"
            assert not dockerignored(source, ignore), f"COPY {source}: excluded by .dockerignore"
    for private in (".venv", ".git", "artifacts", "data"):
        assert dockerignored(private, ignore), f"{private} would be sent to the build"


def requirement_name(requirement: str) -> str:
    """``"torch_geometric>=2.6"`` -> ``"torch-geometric"`` (PEP 503 normalized, extras dropped)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)).lower()


def test_serving_dependencies_hold_no_training_or_dev_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = {requirement_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert "lightgbm" in {requirement_name(r) for r in extras["train"]}
    assert "relserve[train]" in extras["dev"], "the tests train: dev must hold the train extra"
    for extra in ("train", "dev"):
        overlap = base & {requirement_name(r) for r in extras[extra]}
        assert not overlap, f"{sorted(overlap)} of the {extra} extra are base (serving) dependencies"


def test_the_image_installs_the_serving_dependencies_only() -> None:
    installs = [m.group(1) for r in arguments("RUN") for m in re.finditer(r"pip install ([^&;]*)", r)]
    assert installs
    for install in installs:
        packages = [a for a in install.split() if not a.startswith("-") and "INDEX_URL" not in a]
        assert packages in (["."], ['"torch==${TORCH_VERSION}"']), f"pip install {install}: serving only"


def test_the_image_copies_models_and_serve_without_the_benchmarks() -> None:
    ignore = dockerignore_patterns()
    sources = {s for copy in arguments("COPY") for s in copy.split()[:-1] if not s.startswith("--")}
    assert sources == {"pyproject.toml", "models", "serve"}
    assert dockerignored("serve/bench", ignore) and dockerignored("serve/bench/run.py", ignore)
    for shipped in ("serve/__main__.py", "serve/app.py", "serve/score/run.py", "models/registry.py"):
        assert not dockerignored(shipped, ignore), f"{shipped} would not reach the image"


def test_runs_as_a_non_root_user() -> None:
    users = arguments("USER")
    assert users and users[-1].partition(":")[0] not in ("root", "0")
    steps = instructions()
    last_user = max(i for i, (k, _) in enumerate(steps) if k == "USER")
    assert last_user < next(i for i, (k, _) in enumerate(steps) if k == "CMD")
    assert any("useradd" in r and users[-1] in r for r in arguments("RUN")), "the user is never created"
