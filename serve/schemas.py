"""Request and response bodies of the prediction endpoints.

The request models are the annotations of each API's ``decode_request``, so FastAPI validates
a body in the API server process and answers 422 before the request is queued: a malformed
request never reaches, and so never fails, a batch. An id is the data's own (docs/ids.md): any
string, or an integer standing for its decimal digits, of at most ``MAX_ID_BYTES`` UTF-8 bytes;
whether the snapshot holds it is the worker's question (404), not the schema's.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, create_model
from pydantic_core import PydanticCustomError

from models.registry import BINARY, LINK, REGRESSION, TASKS, TaskSpec
from models.schema import ARTICLE, CUSTOMER, MAX_ID_BYTES

MAX_K = 100
DEFAULT_K = 12

_ID_DESCRIPTION = (f"The id as in the data: a string, or an integer (read as its decimal digits); "
                   f"non-empty, at most {MAX_ID_BYTES} bytes in UTF-8.")
_ID_SCHEMA = {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}]}
_JSON_KINDS = {type(None): "null", bool: "a boolean", float: "a number with a fraction or exponent",
               list: "a list", dict: "an object"}
_MAX_ID_BITS = 4 * MAX_ID_BYTES  # an integer of more bits has more than MAX_ID_BYTES digits


def _id_error(message: str, **context: Any) -> PydanticCustomError:
    return PydanticCustomError("entity_id", message, context)


def entity_id(value: Any) -> str:
    """An id field's value as the text the snapshot stores: a string as is, an integer as its digits.

    Args:
        value: the JSON value sent.

    Raises:
        PydanticCustomError: (``entity_id``) not a string or an integer, empty, longer than
            :data:`models.schema.MAX_ID_BYTES` UTF-8 bytes, or not unicode text (a lone surrogate);
            the message is the sentence the 422 answer shows after the field name.
    """
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > _MAX_ID_BITS:  # before str(): it is quadratic in the digits
            raise _id_error(f"must be at most {MAX_ID_BYTES} bytes in UTF-8, got an integer of more digits")
        text = str(value)
    else:
        kind = _JSON_KINDS.get(type(value), type(value).__name__)
        raise _id_error("must be a string or an integer, got {kind}", kind=kind)
    if not text:
        raise _id_error("must not be empty")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise _id_error("must be unicode text, got a lone surrogate {char} at position {position}",
                        char=ascii(text[e.start]), position=e.start) from None
    if size > MAX_ID_BYTES:
        raise _id_error(f"must be at most {MAX_ID_BYTES} bytes in UTF-8, got {{size}} bytes", size=size)
    return text


EntityId = Annotated[str, PlainValidator(entity_id), WithJsonSchema(_ID_SCHEMA)]
"""The type of a request's id field (see :func:`entity_id`)."""
_ID_EXAMPLES = {CUSTOMER: ["13085", 13085, "3f2a6c1e-7b1d-4c55-9e0a-2d9b5e1f4a77"],
                ARTICLE: ["85123A", "0108775015"]}
_ID_FIELDS = {entity: Field(description=_ID_DESCRIPTION, examples=examples)
              for entity, examples in _ID_EXAMPLES.items()}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScoredArticle(BaseModel):
    article_id: str
    score: float


_VALUES = {BINARY: (float, Field(ge=0.0, le=1.0)), REGRESSION: (float, Field(ge=0.0)),
           LINK: (list[ScoredArticle], Field(description="Top-k articles, highest score first."))}


def _request(spec: TaskSpec) -> type[BaseModel]:
    fields: dict = {spec.id_field: (EntityId, _ID_FIELDS[spec.entity_type])}
    if spec.ranks:
        fields["k"] = (int, Field(default=DEFAULT_K, ge=1, le=MAX_K, strict=True))
    return create_model(f"{spec.name.capitalize()}Request", __base__=_Strict,
                        __doc__=f"Body of ``POST {spec.path}``: {spec.question}.", **fields)


def _response(spec: TaskSpec) -> type[BaseModel]:
    extra = {f.name: (f.dtype, Field(description=f.description)) for f in spec.answer_fields}
    return create_model(f"{spec.name.capitalize()}Response", __doc__=f"{spec.question.capitalize()}.",
                        **{spec.id_field: (str, ...), spec.value_field: _VALUES[spec.task_type]}, **extra)


REQUESTS: dict[str, type[BaseModel]] = {name: _request(spec) for name, spec in TASKS.items()}
"""Per task, its request body (``<Task>Request``), built from :mod:`models.registry`."""
RESPONSES: dict[str, type[BaseModel]] = {name: _response(spec) for name, spec in TASKS.items()}
"""Per task, its answer body (``<Task>Response``): the id field, the prediction's field and the
entry's answer fields."""
# Bodies travel to the worker processes pickled, which finds a class by its module and name.
globals().update({model.__name__: model for model in (*REQUESTS.values(), *RESPONSES.values())})


class ErrorBody(BaseModel):
    """Every error answer (404, 413, 415, 422, 503, 504) has this one shape."""

    detail: str
