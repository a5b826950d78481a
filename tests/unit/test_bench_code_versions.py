"""``python -m serve.bench.code_versions``: its arguments are checked before any server starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve.bench.code_versions import main, parse_args

ROOT = Path(__file__).parents[2]


def test_two_checkouts_parse(tmp_path: Path) -> None:
    args = parse_args(["--artifacts", str(tmp_path), "--code", str(ROOT), "--code", str(ROOT),
                       "--rounds", "2"])
    assert args.code == [ROOT, ROOT] and args.rounds == 2 and args.clients == 32
    assert args.artifacts == [tmp_path, tmp_path] and args.ready_rounds == 3  # one --artifacts serves both


def test_each_checkout_may_serve_its_own_artifacts(tmp_path: Path) -> None:
    args = parse_args(["--artifacts", str(tmp_path / "new"), "--artifacts", str(tmp_path / "old"),
                       "--code", str(ROOT), "--code", str(ROOT), "--ready-rounds", "0"])
    assert args.artifacts == [tmp_path / "new", tmp_path / "old"] and args.ready_rounds == 0


@pytest.mark.parametrize(("extra", "message"), [
    (["--code", str(ROOT)], "give --code exactly twice"),
    (["--code", str(ROOT), "--code", "/"], "not a relserve checkout"),
    (["--code", str(ROOT), "--code", str(ROOT), "--rounds", "0"], "must be positive"),
    (["--code", str(ROOT), "--code", str(ROOT), "--ready-rounds", "-1"], "--ready-rounds not negative"),
    (["--code", str(ROOT), "--code", str(ROOT), "--artifacts", "a", "--artifacts", "b"],
     "give --artifacts once"),
])
def test_bad_arguments_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture,
                                               extra: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as stop:
        parse_args(["--artifacts", str(tmp_path), *extra])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_missing_artifacts_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["--artifacts", str(tmp_path / "missing"), "--code", str(ROOT), "--code", str(ROOT)]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and len(err.strip().splitlines()) == 1
