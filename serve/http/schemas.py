"""Request and response bodies of the prediction endpoints.

The request models are the annotations of each API's ``decode_request``, so FastAPI validates
a body in the API server process and answers 422 before the request is queued: a malformed
request never reaches, and so never fails, a batch. An id is the data's own (docs/ids.md): any
string, or an integer standing for its decimal digits, of at most ``MAX_ID_BYTES`` UTF-8 bytes;
whether the snapshot holds it is the worker's question (404), not the schema's.

A body holds one id (``{"customer_id": ...}``) or a list of 1 to :data:`serve.id_fields.MAX_IDS` ids
(``{"customer_ids": [...]}``), never both; a list is answered ``{"answers": [...]}``, one item per
id in request order (a repeated id is answered at each place), an unknown id by an item with an
``error``. The JSON schemas state every rule the validators enforce, so ``/openapi.json`` is the
contract a generated client or test can rely on, except what JSON Schema cannot state: the byte
length of non-ASCII ids (``maxLength`` counts characters), and that an integer id written with a
fraction or exponent (``5.0``, which ``integer`` admits and the server reads as 5) must be below
2**53 in magnitude, where a float still holds its digits (:func:`serve.id_fields.integral`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    create_model,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from models.registry import BINARY, LINK, REGRESSION, TASKS, TaskSpec
from models.registry import DEFAULT_K as DEFAULT_K  # re-exported: a ranking task's k unless it sets one
from models.schema import ARTICLE, CUSTOMER
from serve.id_fields import EntityId, EntityIds, integral

MAX_K = 100
Count = Annotated[int, BeforeValidator(integral)]
"""A JSON integer, ``5`` or ``5.0`` (what JSON Schema's ``integer`` admits); not ``"5"`` or ``true``."""

_ID_EXAMPLES = {CUSTOMER: ["13085", 13085, "3f2a6c1e-7b1d-4c55-9e0a-2d9b5e1f4a77"],
                ARTICLE: ["85123A", "0108775015"]}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScoredArticle(BaseModel):
    article_id: str
    score: float


_VALUES = {BINARY: (float, Field(ge=0.0, le=1.0)), REGRESSION: (float, Field(ge=0.0)),
           LINK: (list[ScoredArticle], Field(description="Top-k articles, highest score first."))}


class IdsRequest(_Strict):
    """What every prediction body shares: exactly one of its one-id and its list-of-ids field."""

    one_field: ClassVar[str]
    many_field: ClassVar[str]
    model_config = ConfigDict(json_schema_extra=lambda schema, cls: cls.one_or_many_schema(schema))

    @model_validator(mode="wrap")
    @classmethod
    def _one_or_many(cls, data: Any, handler: ModelWrapValidatorHandler[IdsRequest]) -> IdsRequest:
        if not isinstance(data, dict):
            return handler(data)
        one, many = cls.one_field in data, cls.many_field in data
        if one and many:
            raise PydanticCustomError("id_fields", f"send {cls.one_field} or {cls.many_field}, not both")
        if one or many:
            return handler(data)
        # Neither: that comes first, then whatever else is wrong (another task's field, say).
        missing = PydanticCustomError("id_fields", f"{cls.one_field}: field required "
                                                   f"(or {cls.many_field}: a list of ids)")
        try:
            handler(data)
        except ValidationError as e:
            others = [InitErrorDetails(type=PydanticCustomError(error["type"], "{m}", {"m": error["msg"]}),
                                       loc=error["loc"], input=error["input"]) for error in e.errors()]
            raise ValidationError.from_exception_data(
                cls.__name__, [InitErrorDetails(type=missing, loc=(), input=data), *others]) from None
        raise missing

    @classmethod
    def one_or_many_schema(cls, schema: dict[str, Any]) -> None:
        """The rule above in JSON Schema: either field required, not both (``oneOf``); neither is null."""
        schema["oneOf"] = [{"required": [cls.one_field]}, {"required": [cls.many_field]}]
        for name in (cls.one_field, cls.many_field):
            schema["properties"][name].pop("default", None)


def _request(spec: TaskSpec) -> type[IdsRequest]:
    many = f"{spec.id_field}s"
    examples = _ID_EXAMPLES[spec.entity_type]
    fields: dict = {spec.id_field: (EntityId, Field(None, examples=examples)),
                    many: (EntityIds, Field(None, examples=[[e for e in examples if isinstance(e, str)]]))}
    if spec.ranks:
        fields["k"] = (Count, Field(default=spec.k, ge=1, le=MAX_K, strict=True,
                                  description="Articles per answer (each id's, for a list)."))
    model = create_model(f"{spec.name.capitalize()}Request", __base__=IdsRequest,
                         __doc__=f"Body of ``POST {spec.path}``: {spec.question}.", **fields)
    model.one_field, model.many_field = spec.id_field, many
    return model


def _response(spec: TaskSpec) -> type[BaseModel]:
    extra = {f.name: (f.dtype, Field(description=f.description)) for f in spec.answer_fields}
    return create_model(f"{spec.name.capitalize()}Response", __doc__=f"{spec.question.capitalize()}.",
                        **{spec.id_field: (str, ...), spec.value_field: _VALUES[spec.task_type]}, **extra)


def _list_response(spec: TaskSpec, answer: type[BaseModel]) -> type[BaseModel]:
    name = spec.name.capitalize()
    unknown = create_model(f"{name}Unknown", __doc__=f"An unknown {spec.id_field} in a list.",
                           **{spec.id_field: (str, ...),
                              "error": (str, Field(examples=[f"unknown {spec.id_field}"]))})
    return create_model(f"{name}ListResponse", __doc__=f"The answers to a list of {spec.id_field}s.",
                        answers=(list[answer | unknown], Field(description="One per id, in request order.")))


REQUESTS: dict[str, type[IdsRequest]] = {name: _request(spec) for name, spec in TASKS.items()}
"""Per task, its request body (``<Task>Request``), built from :mod:`models.registry`."""
RESPONSES: dict[str, type[BaseModel]] = {name: _response(spec) for name, spec in TASKS.items()}
"""Per task, its answer body (``<Task>Response``): the id field, the prediction's field and the
entry's answer fields."""
LIST_RESPONSES: dict[str, type[BaseModel]] = {name: _list_response(spec, RESPONSES[name])
                                              for name, spec in TASKS.items()}
"""Per task, its answer to a list (``<Task>ListResponse``): ``{"answers": [<Task>Response or
<Task>Unknown, ...]}``."""
# Bodies travel to the worker processes pickled, which finds a class by its module and name.
globals().update({model.__name__: model for model in (*REQUESTS.values(), *RESPONSES.values())})


class ErrorBody(BaseModel):
    """Every error answer (404, 413, 415, 422, 503, 504) has this one shape."""

    detail: str
