"""Several ``python -m <tool> ...`` command lines run one after another in one interpreter.

A command line that imports torch spends seconds on the import alone; a test of many argument errors
would pay it once per case. :func:`run_many` starts one ``python`` that runs each case as
``python -m`` would (:func:`runpy.run_module` as ``__main__`` with the case's ``sys.argv``), with file
descriptors 1 and 2 sent to files of their own, so everything written to either (by ``print``, a
logging handler made earlier, or C code) is the case's. The exit code is the interpreter's rule:
``SystemExit`` of ``None`` is 0, of an int that int, of anything else 1 after printing it; any other
exception prints its traceback and is 1.

Use it for cases that fail before doing real work (the argument and file checks); a tool that
starts servers or changes process-wide state belongs in a process of its own.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Finished:
    """What one command line did, as ``subprocess.run(..., capture_output=True, text=True)`` says it."""

    returncode: int
    stdout: str
    stderr: str


def run_many(cases: dict[str, tuple[str, list[str]] | tuple[str, list[str], dict[str, str]]],
             timeout: float = 600) -> dict[str, Finished]:
    """Each case ``name -> (module, args)`` run as ``python -m module *args`` in one fresh interpreter
    (cwd: the repository), in order; ``name -> what it did``. A case ``(module, args, environ)`` runs
    with ``os.environ`` exactly ``environ`` (put back after it)."""
    done = subprocess.run([sys.executable, __file__], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, check=False)
    assert done.returncode == 0, f"the batch runner failed:\n{done.stderr[-3000:]}"
    results = json.loads(done.stdout.splitlines()[-1])
    return {name: Finished(**result) for name, result in results.items()}


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_one(module: str, args: list[str], environ: dict[str, str] | None = None) -> dict[str, object]:
    saved_environ = dict(os.environ)
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    try:
        return _captured(module, args)
    finally:
        os.environ.clear()
        os.environ.update(saved_environ)


def _captured(module: str, args: list[str]) -> dict[str, object]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        argv = sys.argv[:]
        sys.argv = [module, *args]
        try:
            try:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as e:
                code = _exit_code(e.code)
            except BaseException:  # a crash is what the caller wants to see
                traceback.print_exc()
                code = 1
        finally:
            sys.argv = argv
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode("utf-8", "replace"))
    return {"returncode": code, "stdout": texts[0], "stderr": texts[1]}


def _main() -> None:
    sys.path.insert(0, str(REPO))  # as ``python -m`` run from the repository has it
    cases = json.loads(sys.stdin.read())
    results = {name: _run_one(*case) for name, case in cases.items()}
    print(json.dumps(results))


if __name__ == "__main__":
    _main()
