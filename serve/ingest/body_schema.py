"""The ingestion routes' JSON bodies as pydantic models: the OpenAPI description of what is accepted.

:func:`body_models` builds, from the snapshot's columns, a model of each route's JSON body
(``{"rows": [...], "batch_id": ...}``) and its rows. Each field validates with the very rule of
:mod:`serve.ingest.values` that :class:`serve.ingest.validation.Validator` applies, and carries a
JSON schema saying the same; :func:`openapi_body` puts it in the route's OpenAPI description
(NDJSON and CSV bodies are described as text). What no schema can state is left to validation:
whether an id is known (or new, once per batch), a date's place in the lateness window, a
non-ASCII id's byte length beyond ``maxLength`` characters, and the body's byte limit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, WithJsonSchema, create_model

from models.schema import MAX_ID_BYTES, TRANSACTION_COLUMNS
from serve.id_fields import INTEGER_ID, STRING_ID
from serve.ingest import values
from serve.ingest.validation import NODE_KINDS, NodeColumns
from serve.ingest.writer import MAX_KEY_LENGTH

# JSON schemas of the value rules in serve.ingest.values.
_ID = {"anyOf": [{**STRING_ID, "pattern": "^[^\\u0000-\\u001f\\u007f]+$"}, INTEGER_ID],
       "description": f"text of 1 to {MAX_ID_BYTES} UTF-8 bytes without control characters, or an integer "
                      "(its digits)"}
# A calendar date (years 0001-9999, leap days included), then an optional time of day.
_YEAR = "([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})"
_LEAP_YEAR = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = ("((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
              "|02-(0[1-9]|1[0-9]|2[0-8]))")
_DATE_PATTERN = (f"^({_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
                 "([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]+)?)?)?$")
_DATE = {"type": "string", "pattern": _DATE_PATTERN,
         "description": "a calendar date YYYY-MM-DD (a time after it is allowed and ignored), at most "
                        "--ingest-lateness-days before the graph's latest day and not after tomorrow (UTC)"}
# Plain decimal text, short enough never to overflow a float (longer text may still be accepted).
_NUMBER_TEXT = "^ *[+-]?([0-9]{1,15}[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]{1,2})? *$"
_CATEGORY = {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}],
             "description": "text or a number (unseen values count as missing); null or \"\": missing"}
_FEATURE = {"anyOf": [{"type": "number"}, {"type": "null"},
                      {"type": "string", "pattern": f"({_NUMBER_TEXT})|({_DATE_PATTERN})|(^$)"}],
            "description": "a number, its text, or a date (as its day number); null or \"\": missing"}


def _missing_ok(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None or value == "" else check(value)


def _rule(check: Callable[[Any], Any], schema: dict[str, Any]) -> Any:
    """A field type validated by ``check`` (a :mod:`serve.ingest.values` rule) and described by ``schema``."""
    return Annotated[Any, PlainValidator(check), WithJsonSchema(schema)]


_STRICT = ConfigDict(extra="forbid", frozen=True)
_TRANSACTION_FIELDS: dict[str, Any] = {
    "t_dat": _rule(values.day, _DATE), "customer_id": _rule(values.node_id, _ID),
    "article_id": _rule(values.node_id, _ID),
    "price": _rule(functools.partial(values.number, text=False, minimum=0.0),
                   {"type": "number", "minimum": 0}),
    "sales_channel_id": _rule(functools.partial(values.integer, text=False),
                              {"type": "integer", "minimum": 0, "maximum": values.MAX_INT}),
}


_NODE_ID = _rule(values.node_id, _ID)
_CATEGORY_FIELD = _rule(_missing_ok(values.category), _CATEGORY)
_FEATURE_FIELD = _rule(_missing_ok(values.feature_number), _FEATURE)
_DROPPED = _rule(lambda value: None, {"description": "a column of the CSV layout: accepted and dropped"})
_ROWS = {"transactions": "TransactionRow", "customers": "CustomerRow", "articles": "ArticleRow"}


def _row_model(kind: str, columns: dict[str, NodeColumns]) -> type[BaseModel]:
    """A row of ``kind``; fields are named by alias (a column may be called ``copy`` or ``a b``)."""
    if kind == "transactions":
        fields = {name: (_TRANSACTION_FIELDS[name], Field(alias=name)) for name in TRANSACTION_COLUMNS}
    else:
        spec = columns[NODE_KINDS[kind]]
        optional = {**dict.fromkeys(spec.categorical, _CATEGORY_FIELD),
                    **dict.fromkeys(spec.numeric, _FEATURE_FIELD),
                    **dict.fromkeys(sorted(spec.dropped), _DROPPED)}
        fields = {spec.id_field: (_NODE_ID, Field(alias=spec.id_field)),
                  **{name: (rule, Field(None, alias=name)) for name, rule in optional.items()}}
    return create_model(_ROWS[kind], __config__=_STRICT,
                        **{f"field_{i}": field for i, field in enumerate(fields.values())})


def body_models(columns: dict[str, NodeColumns], max_rows: int) -> dict[str, type[BaseModel]]:
    """Per ingestion route (``transactions``, ``customers``, ``articles``), its JSON body as a model.

    Args:
        columns: per node type, what its rows may hold (:func:`serve.ingest.service.node_columns`).
        max_rows: ``--ingest-max-rows`` (more rows are a 413).
    """
    out = {}
    for kind in ("transactions", *NODE_KINDS):
        rows = (list[_row_model(kind, columns)], Field(min_length=1, max_length=max_rows))  # type: ignore[misc]
        batch_id = (str | None, Field(None, min_length=1, max_length=MAX_KEY_LENGTH, pattern="^[ -~]+$",
                                      description="an idempotency key, as the Idempotency-Key header"))
        out[kind] = create_model(f"Ingest{kind.capitalize()}", __config__=_STRICT, rows=rows,
                                 batch_id=batch_id)
    return out


def _inline(schema: Any, definitions: dict[str, Any]) -> Any:
    """``schema`` with every ``#/$defs/`` reference replaced by its definition (OpenAPI has no ``$defs``)."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline(definitions[schema["$ref"].rsplit("/", 1)[-1]], definitions)
        return {k: _inline(v, definitions) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline(v, definitions) for v in schema]
    return schema


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of an ingestion route: its JSON body from ``model``, NDJSON and CSV as text."""
    schema = model.model_json_schema(by_alias=True)
    line = "one row object per line, as in the JSON body's rows"
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": _inline(schema, schema.get("$defs", {}))},
        "application/x-ndjson": {"schema": {"type": "string", "description": line}},
        "text/csv": {"schema": {"type": "string", "description": "a header line naming the columns, then "
                                                                  "one row per line; values are text"}}}}}
