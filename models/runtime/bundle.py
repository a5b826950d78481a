"""Checkpoint bundle: one directory per task holding everything serving needs besides the snapshot.

``<artifacts>/<task>/``
    ``weights.safetensors``  the state dict (safetensors: loading never unpickles anything)
    ``config.json``          model, sampler, bucket ladders, task, training snapshot's fingerprint, versions,
                             feature definition and snapshot columns (:mod:`models.runtime.bundle_inputs`)
    ``metrics.json``         model and baselines on val/test (written by ``training.fit``)
    ``compile_cache/``       ``torch.compiler`` cache artifacts, one file per torch version/device/strategy

The graph snapshot lives beside the bundles in ``<artifacts>/snapshot/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import safetensors
import safetensors.torch
import torch
import torch_geometric

from models.feature_definitions import feature_definition
from models.files import atomic_write
from models.graph.buckets import BucketLadder
from models.graph.features import table_specs
from models.graph.sampler import SamplerConfig
from models.nn.config import ModelConfig
from models.nn.inputs import TableSpec
from models.nn.model import TaskModel
from models.registry import TASK_NAMES
from models.runtime.bundle_inputs import code_mismatch, snapshot_mismatch, specs_mismatch
from models.runtime.compile_cache import cache_key
from models.store.snapshot import GraphSnapshot

BUNDLE_FORMAT = 1
WEIGHTS_FILE = "weights.safetensors"
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.json"
CACHE_DIR = "compile_cache"
SNAPSHOT_DIR = "snapshot"


class BundleError(ValueError):
    """A bundle that cannot be used; the message is one line naming the file and the problem."""


def library_versions() -> dict[str, str]:
    return {"torch": torch.__version__, "torch_geometric": torch_geometric.__version__,
            "python": platform.python_version()}


@dataclass
class BundleConfig:
    """What ``config.json`` records about a trained task model.

    Args:
        task: a name of :data:`models.registry.TASKS`.
        model: model shape.
        sampler: fanouts used in training; serving samples with ``strategy="last"``.
        specs: per node type, the feature columns the encoders were built for.
        ladders: per seed type of the head, the serving bucket ladder (for ``max_batch_size``).
        max_batch_size: largest serving batch the ladders hold.
        fingerprint: content fingerprint of the snapshot the model was trained on (informational:
            a bundle is bound to the snapshot's schema and the feature definitions, not to its
            content, so it serves a rebuilt, grown or compacted snapshot of the same columns).
        snapshot_schema: the training snapshot's :func:`models.feature_definitions.snapshot_schema`;
            ``None`` in a bundle written before it was recorded.
        feature_definition: :func:`models.feature_definitions.feature_definition` at training time;
            ``None`` in a bundle written before it was recorded (read as version 1).
        versions: library versions at training time (informational).
        training: how it was trained (epochs, seed, compile strategy, ...; informational).
        weights_sha256: sha256 of ``weights.safetensors``, set by :func:`save_bundle`; loading
            refuses weights that do not match it (a flipped byte in a value parses fine).
    """

    task: str
    model: ModelConfig
    sampler: SamplerConfig
    specs: dict[str, TableSpec]
    ladders: dict[str, BucketLadder]
    max_batch_size: int
    fingerprint: str
    snapshot_schema: dict[str, dict[str, list]] | None
    feature_definition: dict[str, Any] | None = field(default_factory=feature_definition)
    versions: dict[str, str] = field(default_factory=library_versions)
    training: dict[str, Any] = field(default_factory=dict)
    weights_sha256: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": BUNDLE_FORMAT, "task": self.task, "model": self.model.to_dict(),
            "sampler": {"fanouts": list(self.sampler.fanouts), "strategy": self.sampler.strategy,
                        "per_day": self.sampler.per_day},
            "specs": {t: {"cardinalities": list(s.cardinalities), "num_numeric": s.num_numeric}
                      for t, s in self.specs.items()},
            "ladders": {t: ladder.to_dict() for t, ladder in self.ladders.items()},
            "max_batch_size": self.max_batch_size, "fingerprint": self.fingerprint,
            "feature_definition": self.feature_definition, "snapshot_schema": self.snapshot_schema,
            "versions": self.versions, "training": self.training, "weights_sha256": self.weights_sha256,
        }

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> BundleConfig:
        if values.get("format") != BUNDLE_FORMAT:
            raise ValueError(f"bundle format {values.get('format')!r}, this relserve reads {BUNDLE_FORMAT}")
        if values["task"] not in TASK_NAMES:
            raise ValueError(f"unknown task {values['task']!r}")
        recorded = {k: values.get(k) for k in ("feature_definition", "snapshot_schema")}
        for key, value in recorded.items():
            if value is not None and not isinstance(value, dict):
                raise ValueError(f"{key} must be an object, not {type(value).__name__}")
        return cls(
            task=values["task"], model=ModelConfig.from_dict(values["model"]),
            sampler=SamplerConfig(tuple(int(f) for f in values["sampler"]["fanouts"]),
                                  values["sampler"]["strategy"], int(values["sampler"].get("per_day", 0))),
            specs={t: TableSpec(tuple(int(c) for c in s["cardinalities"]), int(s["num_numeric"]))
                   for t, s in values["specs"].items()},
            ladders={t: BucketLadder.from_dict(v) for t, v in values["ladders"].items()},
            max_batch_size=int(values["max_batch_size"]), fingerprint=str(values["fingerprint"]),
            **recorded,
            versions=dict(values.get("versions", {})), training=dict(values.get("training", {})),
            weights_sha256=str(values.get("weights_sha256", "")),
        )


def save_bundle(directory: Path, config: BundleConfig, model: TaskModel, metrics: dict | None = None) -> None:
    """Write a bundle; files are replaced atomically so a crash never leaves a half-written one."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CACHE_DIR).mkdir(exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    weights = safetensors.torch.save(state)
    config = dataclasses.replace(config, weights_sha256=hashlib.sha256(weights).hexdigest())
    atomic_write(directory / WEIGHTS_FILE, weights)
    atomic_write(directory / CONFIG_FILE, json.dumps(config.to_dict(), indent=2).encode())
    if metrics is not None:
        atomic_write(directory / METRICS_FILE, json.dumps(metrics, indent=2).encode())


def read_config(directory: Path) -> BundleConfig:
    """Parse ``config.json``; :class:`BundleError` naming the file on any problem."""
    path = directory / CONFIG_FILE
    try:
        return BundleConfig.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        raise BundleError(f"{path}: missing (not a relserve bundle directory)") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"{path}: invalid bundle config ({type(exc).__name__}: {exc})") from None


def load_bundle(directory: Path, snapshot: GraphSnapshot | Any, device: torch.device | str = "cpu"
                ) -> tuple[BundleConfig, TaskModel]:
    """Rebuild a task model from its bundle alone, checked against the snapshot it will run on.

    Raises:
        BundleError: missing or corrupt files, a weights file that is not safetensors (a pickle,
            say: it is never unpickled), weights that do not fit the config, a feature definition
            that differs from this code's, or a snapshot whose feature columns differ from the
            training snapshot's (the message names what differs). A snapshot of the same columns
            with other content (rebuilt from more data, or compacted from a live graph) is accepted.
    """
    directory = Path(directory)
    config = read_config(directory)
    problem = (code_mismatch(config.feature_definition)
               or snapshot_mismatch(config.snapshot_schema, snapshot, snapshot.directory)
               or specs_mismatch(config.specs, table_specs(snapshot), snapshot.directory))
    if problem:
        raise BundleError(f"{directory / CONFIG_FILE}: {problem}")
    path = directory / WEIGHTS_FILE
    try:
        weights = path.read_bytes()
        state = safetensors.torch.load(weights)
    except FileNotFoundError:
        raise BundleError(f"{path}: missing") from None
    except (safetensors.SafetensorError, ValueError, OSError) as exc:
        raise BundleError(f"{path}: not a readable safetensors file ({exc}); refusing to load it") from None
    model = TaskModel(config.task, config.specs, config.model)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()
        older = " (a bundle trained by an older relserve: retrain it)" if "Missing key" in str(exc) else ""
        raise BundleError(f"{path}: weights do not match config.json{older} "
                          f"({' '.join(first[:2])[:300]})") from None
    if config.weights_sha256 and hashlib.sha256(weights).hexdigest() != config.weights_sha256:
        raise BundleError(f"{path}: checksum differs from config.json's weights_sha256 (corrupted or "
                          "replaced since training); refusing to load it")
    return config, model.to(device).eval()


def user_cache_dir() -> Path:
    """The per-user cache root: ``$XDG_CACHE_HOME/relserve`` (``~/.cache/relserve`` by default)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "relserve"


def _writable(directory: Path) -> bool:
    existing = directory if directory.exists() else directory.parent
    return os.access(existing, os.W_OK)


def compile_cache_dirs(bundle_dir: Path, config: BundleConfig,
                       cache_dir: Path | None = None) -> tuple[list[Path], Path]:
    """Where a bundle's compile cache is looked for, in order, and where a fresh one is written.

    Beside the artifacts (``<bundle>/compile_cache/``) when that is writable and no ``cache_dir``
    is given; otherwise ``<cache_dir or user_cache_dir()>/<task>-<weights sha256 prefix>/`` is
    written, and read before the bundle's own cache (which a read-only bundle may still ship).

    Args:
        bundle_dir: the task's bundle.
        config: its config (the task and weights digest name the directory outside the bundle).
        cache_dir: ``--compile-cache-dir``; ``None``: the default above.
    """
    beside = Path(bundle_dir) / CACHE_DIR
    if cache_dir is None and _writable(beside):
        return [beside], beside
    own = Path(cache_dir or user_cache_dir()) / f"{config.task}-{config.weights_sha256[:16]}"
    return [own, beside], own


def compile_cache_path(directory: Path, device: torch.device | str, strategy: str, mode: str | None,
                       ladders: dict[str, BucketLadder]) -> Path:
    """The artifact in cache ``directory`` for this torch, device, strategy and ladder."""
    key = {**cache_key(device), "strategy": strategy, "mode": mode or "default",
           "ladders": {t: ladder.to_dict() for t, ladder in sorted(ladders.items())}}
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(directory) / f"{torch.device(device).type}-{strategy}-{digest}.bin"
