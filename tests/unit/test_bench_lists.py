"""serve.bench.lists: its bodies are lists of known ids the schema accepts; bad arguments exit in one line."""

from __future__ import annotations

import json

import pytest

from models.registry import TASKS
from models.store.snapshot import GraphSnapshot
from serve.bench.lists import list_bodies, main
from serve.http.schemas import REQUESTS
from serve.id_fields import MAX_IDS


@pytest.mark.parametrize("task", list(REQUESTS))
def test_list_bodies_hold_known_ids_and_validate(trained_artifacts, task):
    snapshot = GraphSnapshot.open(trained_artifacts / "snapshot")
    bodies = list_bodies(snapshot, task, size=7, count=3)
    assert len(bodies) == 3
    for body in bodies:
        request = REQUESTS[task].model_validate(json.loads(body))
        ids = getattr(request, REQUESTS[task].many_field)
        assert len(ids) == 7 and (snapshot.lookup(TASKS[task].entity_type, list(ids)) >= 0).all()


@pytest.mark.parametrize("args, message", [
    (["--size", "0"], f"--size must be 1..{MAX_IDS}, got 0"),
    (["--size", str(MAX_IDS + 1)], f"--size must be 1..{MAX_IDS}"),
    (["--tasks", "nope"], "--tasks names nope"),
])
def test_bad_arguments_exit_2_with_one_line(trained_artifacts, capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main(["--artifacts", str(trained_artifacts), *args])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and message in err, err
