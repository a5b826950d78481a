"""Request and response bodies of the prediction endpoints.

The request models are the annotations of each API's ``decode_request``, so FastAPI validates
a body in the API server process and answers 422 before the request is queued: a malformed
request never reaches, and so never fails, a batch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, create_model

from models.registry import BINARY, LINK, REGRESSION, TASKS, TaskSpec
from models.schema import ARTICLE, ARTICLE_ID_LEN, CUSTOMER, CUSTOMER_ID_LEN

MAX_K = 100
DEFAULT_K = 12


@dataclass(frozen=True)
class IdFormat:
    """A fixed-length id over one character class, e.g. 64 lowercase hex characters.

    Args:
        length: number of characters.
        characters: a regex character class body, e.g. ``"0-9a-f"``.
        name: what the characters are, for messages.
    """

    length: int
    characters: str
    name: str

    @property
    def pattern(self) -> str:
        return f"^[{self.characters}]{{{self.length}}}$"

    @property
    def description(self) -> str:
        return f"{self.length} {self.name}"

    def problem(self, value: str) -> str:
        """Why ``value`` does not match, without quoting more than one of its characters."""
        if len(value) != self.length:
            return f"got {len(value)} character{'' if len(value) == 1 else 's'}"
        allowed = re.compile(f"[{self.characters}]")
        bad = next(((i, c) for i, c in enumerate(value) if not allowed.fullmatch(c)), None)
        return f"got {bad[1]!a} at position {bad[0]}" if bad else "got a string that does not match"


CUSTOMER_ID = IdFormat(CUSTOMER_ID_LEN, "0-9a-f", "lowercase hex characters")
ARTICLE_ID = IdFormat(ARTICLE_ID_LEN, "0-9", "digits (keep the leading zero)")
ID_FORMATS = {f.pattern: f for f in (CUSTOMER_ID, ARTICLE_ID)}

_CUSTOMER_ID = Field(pattern=CUSTOMER_ID.pattern, description=CUSTOMER_ID.description + ".",
                     examples=["00000dbacae5abe5e23885899a1fa44253a17956c6d1c3d25f88aa139fdfc657"])
_ARTICLE_ID = Field(pattern=ARTICLE_ID.pattern, description=ARTICLE_ID.description + ".",
                    examples=["0108775015"])


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScoredArticle(BaseModel):
    article_id: str
    score: float


_ID_FIELDS = {CUSTOMER: _CUSTOMER_ID, ARTICLE: _ARTICLE_ID}
_VALUES = {BINARY: (float, Field(ge=0.0, le=1.0)), REGRESSION: (float, Field(ge=0.0)),
           LINK: (list[ScoredArticle], Field(description="Top-k articles, highest score first."))}


def _request(spec: TaskSpec) -> type[BaseModel]:
    fields: dict = {spec.id_field: (str, _ID_FIELDS[spec.entity_type])}
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
