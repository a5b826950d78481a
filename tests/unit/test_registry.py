"""The task registry: every entry's references resolve, and it stays importable without torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from models.registry import (
    TASK_NAMES,
    TASKS,
    TaskReferenceError,
    TaskSpec,
    derived,
    register_task,
    task_spec,
    unregister_task,
)
from serve.http.apis import API_CLASSES, WorkerSettings
from serve.http.schemas import REQUESTS, RESPONSES
from training.tasks.baselines import BASELINES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(TASKS))
def test_every_entry_names_a_head_label_function_baselines_and_metrics_that_exist(name: str) -> None:
    spec = TASKS[name]
    assert spec.head_class().seed_types[0] == spec.entity_type, "the head embeds the task's entity"
    assert callable(spec.label_function())
    assert spec.baselines and all(callable(f) for f in BASELINES[name].values())
    assert list(spec.metric_functions()) == list(spec.metrics)
    assert all(map(callable, spec.metric_functions().values()))
    assert all(callable(spec.resolve(f.compute)) for f in spec.answer_fields)
    assert API_CLASSES[name].task == name and API_CLASSES[name].__module__ == "serve.http.apis"
    assert API_CLASSES[name](WorkerSettings("bundle", "snapshot")).api_path == spec.path == f"/predict/{name}"
    extra = [f.name for f in spec.answer_fields]
    assert list(RESPONSES[name].model_fields) == [spec.id_field, spec.value_field, *extra]
    assert spec.id_field in REQUESTS[name].model_fields and ("k" in REQUESTS[name].model_fields) == spec.ranks


def test_churn_declares_whether_the_customer_is_in_its_population() -> None:
    fields = [(f.name, f.dtype) for f in TASKS["churn"].answer_fields]
    assert fields == [("active_last_7d", bool), ("history", int)]


def test_every_answer_says_how_much_history_the_model_saw() -> None:
    for spec in TASKS.values():
        history = [f for f in spec.answer_fields if f.name == "history"]
        assert history and history[0].dtype is int and "0: none" in history[0].description


def test_the_load_test_mix_adds_up_to_all_the_traffic() -> None:
    assert sum(spec.load_share for spec in TASKS.values()) == 100


def test_an_entry_must_select_on_one_of_its_metrics_and_unknown_tasks_are_named() -> None:
    fields = {**TASKS["churn"].__dict__, "primary_metric": "mae"}
    with pytest.raises(ValueError, match="primary metric mae not in"):
        TaskSpec(**fields)
    with pytest.raises(ValueError, match="unknown task 'nope'; use one of churn, sales, purchase"):
        task_spec("nope")


def test_a_reference_that_does_not_resolve_names_its_entry_and_itself() -> None:
    fields = {**TASKS["sales"].__dict__, "name": "broken", "labels": "training.tasks.cutoffs:no_such"}
    spec = TaskSpec(**fields)
    with pytest.raises(TaskReferenceError, match=r"task broken: cannot resolve '.*cutoffs:no_such'"):
        spec.label_function()
    with pytest.raises(TaskReferenceError, match="task broken: 'nope' is not a reference"):
        TaskSpec(**{**fields, "head": "nope"})


def test_a_registered_task_reaches_every_live_view_until_unregistered() -> None:
    doubled = derived(lambda spec: spec.window_days * 2)
    spec = TaskSpec(**{**TASKS["sales"].__dict__, "name": "extra", "window_days": 14})
    register_task(spec)
    try:
        assert list(TASKS)[-1] == "extra" and "extra" in TASK_NAMES and doubled["extra"] == 28
        assert task_spec("extra") is spec and BASELINES["extra"].keys() == BASELINES["sales"].keys()
        with pytest.raises(ValueError, match="task 'extra' is registered already"):
            register_task(spec)
    finally:
        unregister_task("extra")
    assert "extra" not in TASKS and "extra" not in doubled and len(doubled) == len(TASKS)


def test_task_modules_named_in_the_environment_are_imported_on_the_first_read(tmp_path) -> None:
    (tmp_path / "extra_task.py").write_text(
        "from models.registry import TASKS, TaskSpec, register_task\n"
        "register_task(TaskSpec(**{**TASKS['sales'].__dict__, 'name': 'extra'}))\n")
    code = "import models.registry as r; print(','.join(r.TASK_NAMES))"
    env = {**os.environ, "RELSERVE_TASK_MODULES": " extra_task ,", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.stdout.strip() == "churn,sales,purchase,extra", done.stderr
    env["RELSERVE_TASK_MODULES"] = "no_such_module"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    assert "RELSERVE_TASK_MODULES: cannot import 'no_such_module'" in done.stderr


def test_the_registry_imports_no_torch() -> None:
    code = "import sys, models.registry; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
