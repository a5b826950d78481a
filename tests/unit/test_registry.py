"""The task registry: every entry's references resolve, and it stays importable without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from models.nn.heads import HEADS
from models.registry import TASKS, TaskSpec, task_spec
from serve.apis import API_CLASSES
from serve.schemas import REQUESTS, RESPONSES
from training.tasks import baselines, definitions


@pytest.mark.parametrize("name", list(TASKS))
def test_every_entry_names_a_head_label_function_and_baselines_that_exist(name: str) -> None:
    spec = TASKS[name]
    assert HEADS[name].seed_types[0] == spec.entity_type, "the head embeds the task's entity"
    assert callable(getattr(definitions, spec.labels))
    assert spec.baselines and all(callable(getattr(baselines, f)) for f in spec.baselines.values())
    assert API_CLASSES[name].task == name and API_CLASSES[name].__module__ == "serve.apis"
    extra = ["active_last_7d"] if name == "churn" else []  # churn says if the customer is in its population
    assert list(RESPONSES[name].model_fields) == [spec.id_field, spec.value_field, *extra]
    assert spec.id_field in REQUESTS[name].model_fields and ("k" in REQUESTS[name].model_fields) == spec.ranks


def test_the_load_test_mix_adds_up_to_all_the_traffic() -> None:
    assert sum(spec.load_share for spec in TASKS.values()) == 100


def test_an_entry_must_select_on_one_of_its_metrics_and_unknown_tasks_are_named() -> None:
    fields = {**TASKS["churn"].__dict__, "primary_metric": "mae"}
    with pytest.raises(ValueError, match="primary metric mae not in"):
        TaskSpec(**fields)
    with pytest.raises(ValueError, match="unknown task 'nope'; use one of churn, sales, purchase"):
        task_spec("nope")


def test_the_registry_imports_no_torch() -> None:
    code = "import sys, models.registry; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
