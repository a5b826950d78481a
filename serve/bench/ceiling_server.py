"""The framework's ceiling: the server's routes and request bodies, with no model behind them.

``python -m serve.bench.ceiling_server --artifacts DIR --port P [python -m serve options]`` serves
``POST /predict/<task>`` for the tasks of DIR with the same request models (so FastAPI parses and
validates the same bodies, single ids and lists), the same LitServe options (transport, batching,
worker and API-server counts, timeouts) and the same batched loop as ``python -m serve``, but
``predict`` answers a constant (one per id of a list): no model, no admission middleware, no
metrics. What it reaches is what LitServe itself can do on this machine as configured;
``serve.bench --ceiling`` compares the real server to it.

``--stock`` serves the same routes the way a new LitServe user would write them: LitServe's own
batched loop and default options (Manager-queue transport, START messages, GZip middleware). Both
start the workers and API servers that ``python -m serve`` would start on this machine
(:mod:`serve.layout`, or the flags given), so a ratio compares servers on the same processes.
"""

# No ``from __future__ import annotations``: LitServe hands the evaluated annotations of
# decode_request / encode_response to FastAPI as the route's body and response models.
import sys
import typing
from typing import Any, ClassVar

import litserve as ls
from pydantic import BaseModel
from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import JSONResponse

from models.registry import TASKS as SPECS
from models.registry import TaskSpec
from models.schema import ARTICLE
from serve.config import TASKS, ServeConfig, parse_args
from serve.http.batching import BlockingBatchedLoop
from serve.http.schemas import DEFAULT_K, REQUESTS, RESPONSES

PROG = "python -m serve.bench.ceiling_server"


class ConstantAPI(ls.LitAPI):
    """``predict`` answers every request of a batch with one constant; hooks do no other work."""

    task: ClassVar[str]
    answer: ClassVar[dict[str, Any]]

    def setup(self, device: str) -> None:
        pass

    def predict(self, inputs: list) -> list:
        # A list's answer is encoded here, as the real server's are: no response-model validation.
        return [self.answer if n is None else JSONResponse({"answers": [self.answer] * n}) for n in inputs]


def _constant(spec: TaskSpec, model: type[BaseModel]) -> dict[str, Any]:
    """A valid answer of ``model`` (whatever fields the registry gives it), built once."""
    ident = "0108775015" if spec.entity_type == ARTICLE else "0" * 64
    fill = {str: ident, float: 0.5, int: 0, bool: False}
    answer = {}
    for name, field in model.model_fields.items():
        kind = typing.get_origin(field.annotation) or field.annotation
        answer[name] = ([{"article_id": "0108775015", "score": 0.5}] * DEFAULT_K if kind is list
                        else fill.get(kind, ident if name == spec.id_field else 0.5))
    return model.model_validate(answer).model_dump()


def _constant_api(spec: TaskSpec) -> type[ConstantAPI]:
    def decode_request(self: ConstantAPI, request: Any) -> Any:
        many = getattr(request, f"{spec.id_field}s", None)
        return None if many is None else len(many)  # a list is answered one constant per id

    def encode_response(self: ConstantAPI, output: Any) -> Any:
        return output

    decode_request.__annotations__ = {"request": REQUESTS[spec.name], "return": Any}
    encode_response.__annotations__ = {"output": Any, "return": RESPONSES[spec.name]}
    name = f"{spec.name.capitalize()}Constant"
    cls = type(name, (ConstantAPI,), {"__module__": __name__, "__qualname__": name, "task": spec.name,
                                      "answer": _constant(spec, RESPONSES[spec.name]),
                                      "decode_request": decode_request, "encode_response": encode_response})
    globals()[name] = cls  # LitServe pickles the API into its worker: the class must be importable
    return cls


CONSTANT_APIS = {name: _constant_api(spec) for name, spec in SPECS.items()}


def build_ceiling(config: ServeConfig, stock: bool = False) -> ls.LitServer:
    """A LitServer answering constants on the routes of ``config.tasks`` (all tasks if ``None``)."""
    tasks = config.tasks or TASKS
    if stock:
        apis = [CONSTANT_APIS[t](max_batch_size=config.max_batch_size, batch_timeout=config.batch_timeout_s,
                                 api_path=SPECS[t].path) for t in tasks]
        return ls.LitServer(apis, accelerator="cpu", timeout=config.request_timeout_s,
                            workers_per_device=config.workers_per_task)
    from serve.http.app import new_litserver  # after the argument check: imports FastAPI and LitServe's app

    apis = [CONSTANT_APIS[t](max_batch_size=config.max_batch_size, batch_timeout=config.batch_timeout_s,
                             api_path=SPECS[t].path, loop=BlockingBatchedLoop()) for t in tasks]
    server = new_litserver(apis, config, "cpu")
    server.app.user_middleware = [m for m in server.app.user_middleware if m.cls is not GZipMiddleware]
    return server


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stock = "--stock" in argv
    config = parse_args([a for a in argv if a != "--stock"])
    # The processes python -m serve would start here, so the ceiling is measured on the same layout.
    config, layout = config.with_layout(len(config.tasks or TASKS), "cpu")
    server = build_ceiling(config, stock)
    kind = "stock LitServe" if stock else "as configured"
    print(f"{PROG}: constant answers on http://{config.host}:{config.port} ({kind}; {layout})",
          file=sys.stderr, flush=True)
    server.run(host=config.host, port=config.port, num_api_servers=config.api_servers,
               generate_client_file=False, log_level=config.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
