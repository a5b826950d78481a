"""Request and response bodies of the prediction endpoints.

The request models are the annotations of each API's ``decode_request``, so FastAPI validates
a body in the API server process and answers 422 before the request is queued: a malformed
request never reaches, and so never fails, a batch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from models.schema import ARTICLE_ID_LEN, CUSTOMER_ID_LEN

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


class CustomerRequest(_Strict):
    """Body of ``POST /predict/churn``."""

    customer_id: str = _CUSTOMER_ID


class ArticleRequest(_Strict):
    """Body of ``POST /predict/sales``."""

    article_id: str = _ARTICLE_ID


class PurchaseRequest(_Strict):
    """Body of ``POST /predict/purchase``: the ``k`` articles the customer most likely buys next."""

    customer_id: str = _CUSTOMER_ID
    k: int = Field(default=DEFAULT_K, ge=1, le=MAX_K, strict=True)


class ChurnResponse(BaseModel):
    """Probability that an active customer buys nothing in the 7 days after the snapshot.

    The model is trained on customers who bought in the last 7 days of their history (the
    RelBench definition); ``active_last_7d`` says whether this customer is one of them. For a
    customer who is not, the probability is an extrapolation outside the trained population.
    """

    customer_id: str
    churn_probability: float = Field(ge=0.0, le=1.0)
    active_last_7d: bool = Field(description="bought in the last 7 days of the snapshot: the population "
                                             "the churn model is trained on (false: an extrapolation)")


class SalesResponse(BaseModel):
    """Predicted sum of prices of an article's sales in the 7 days after the snapshot."""

    article_id: str
    sales_7d: float = Field(ge=0.0)


class ScoredArticle(BaseModel):
    article_id: str
    score: float


class PurchaseResponse(BaseModel):
    """Top-k articles, highest score first."""

    customer_id: str
    articles: list[ScoredArticle]


class ErrorBody(BaseModel):
    """Every error answer (404, 413, 415, 422, 503, 504) has this one shape."""

    detail: str
