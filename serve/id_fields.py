"""The id fields of prediction requests: one id (:data:`EntityId`) or a list of them (:data:`EntityIds`).

An id is the data's own (docs/ids.md): a string, or an integer standing for its decimal digits,
non-empty and at most :data:`models.schema.MAX_ID_BYTES` UTF-8 bytes. An integer may be written
``5.0``, as JSON Schema's ``integer`` allows, when it is below 2**53 in magnitude (where a float holds
every integer exactly; past it the digits sent are lost, so such a number is refused). A list holds
1 to :data:`MAX_IDS` ids of one JSON type (all strings or all integers). Each validator raises a
``PydanticCustomError`` whose message is the sentence a 422 answer shows after the field's name; a
list names the index of the id at fault (``customer_ids[3]: ...``). The JSON schemas attached
state the same rules, so the OpenAPI description is what the server enforces.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import PlainValidator, WithJsonSchema
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from models.schema import MAX_ID_BYTES

MAX_IDS = 1000
"""Most ids in one request's list."""

_JSON_KINDS = {type(None): "null", bool: "a boolean", float: "a number with a fraction or exponent",
               list: "a list", dict: "an object", str: "a string", int: "an integer"}
_MAX_ID_BITS = 4 * MAX_ID_BYTES  # an integer of more bits has more than MAX_ID_BYTES digits
_MAX_SHOWN_ERRORS = 5  # a 422 shows five problems; a list of 1000 bad ids stops collecting there
# The integers whose decimal text (sign included) fits in MAX_ID_BYTES bytes.
_INT_MIN, _INT_MAX = -(10 ** (MAX_ID_BYTES - 1) - 1), 10**MAX_ID_BYTES - 1
STRING_ID = {"type": "string", "minLength": 1, "maxLength": MAX_ID_BYTES}
INTEGER_ID = {"type": "integer", "minimum": _INT_MIN, "maximum": _INT_MAX}
ID_SCHEMA = {"anyOf": [STRING_ID, INTEGER_ID]}
IDS_SCHEMA = {"anyOf": [{"type": "array", "items": item, "minItems": 1, "maxItems": MAX_IDS}
                        for item in (STRING_ID, INTEGER_ID)]}


EXACT_FLOAT_LIMIT = 2**53
"""Every integer of smaller magnitude is exactly a float: ``5.0`` sent is 5 (see :func:`integral`)."""


def integral(value: Any) -> Any:
    """``value`` as an int when it is a JSON integer, written ``5`` or ``5.0`` (a float with no
    fraction below :data:`EXACT_FLOAT_LIMIT` in magnitude); anything else unchanged, for the
    validator to refuse. JSON Schema's ``integer`` admits ``5.0``, so the server does too."""
    if type(value) is float and value.is_integer() and abs(value) < EXACT_FLOAT_LIMIT:
        return int(value)
    return value


def _id_error(message: str, **context: Any) -> PydanticCustomError:
    return PydanticCustomError("entity_id", message, context)


def _kind(value: Any) -> str:
    return _JSON_KINDS.get(type(value), type(value).__name__)


def entity_id(value: Any) -> str:
    """An id field's value as the text the snapshot stores: a string as is, an integer as its digits.

    Args:
        value: the JSON value sent.

    Raises:
        PydanticCustomError: (``entity_id``) not a string or an integer (:func:`integral`), empty, longer than
            :data:`models.schema.MAX_ID_BYTES` UTF-8 bytes, or not unicode text (a lone surrogate);
            the message is the sentence the 422 answer shows after the field name.
    """
    value = integral(value)
    if isinstance(value, str):
        text = value
    elif isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > _MAX_ID_BITS:  # before str(): it is quadratic in the digits
            raise _id_error(f"must be at most {MAX_ID_BYTES} bytes in UTF-8, got an integer of more digits")
        text = str(value)
    elif type(value) is float and value.is_integer():
        raise _id_error("must be below 2**53 when written with a fraction or exponent (its digits are "
                        "lost): send it as an integer or a string, got {value}", value=repr(value))
    else:
        raise _id_error("must be a string or an integer, got {kind}", kind=_kind(value))
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


def entity_ids(value: Any) -> tuple[str, ...]:
    """A list field's ids as text (see :func:`entity_id`), in order, repeats kept.

    Args:
        value: the JSON value sent.

    Raises:
        PydanticCustomError: (``entity_ids``) not a list, or not 1 to :data:`MAX_IDS` items.
        pydantic_core.ValidationError: one error per bad id (the first five), located at its index:
            an id :func:`entity_id` refuses, or one of another JSON type than the first id's.
    """
    if not isinstance(value, list):
        raise PydanticCustomError("entity_ids", "must be a list of ids, got {kind}", {"kind": _kind(value)})
    if not 1 <= len(value) <= MAX_IDS:
        raise PydanticCustomError("entity_ids", f"must hold 1 to {MAX_IDS} ids, got {{count}}",
                                  {"count": len(value)})
    first = type(integral(value[0]))
    texts: list[str] = []
    errors: list[InitErrorDetails] = []
    for i, item in enumerate(value):
        try:
            kind = type(integral(item))
            if kind is not first and first in (str, int) and kind in (str, int):
                raise _id_error("must be {first} like the list's first id, got {kind}",
                                first=_kind(integral(value[0])), kind=_kind(integral(item)))
            texts.append(entity_id(item))
        except PydanticCustomError as e:
            errors.append(InitErrorDetails(type=e, loc=(i,), input=item))
            if len(errors) == _MAX_SHOWN_ERRORS:
                break
    if errors:
        raise ValidationError.from_exception_data("entity_ids", errors)
    return tuple(texts)


_ID_DESCRIPTION = (f"The id as in the data: a string, or an integer (read as its decimal digits); "
                   f"non-empty, at most {MAX_ID_BYTES} bytes in UTF-8.")
_IDS_DESCRIPTION = (f"1 to {MAX_IDS} ids, each as in the one-id field, all strings or all integers; "
                    "answered in this order, a repeated id at each of its places.")

EntityId = Annotated[str, PlainValidator(entity_id),
                     WithJsonSchema({**ID_SCHEMA, "description": _ID_DESCRIPTION})]
"""The type of a request's one-id field (see :func:`entity_id`)."""
EntityIds = Annotated[tuple[str, ...], PlainValidator(entity_ids),
                      WithJsonSchema({**IDS_SCHEMA, "description": _IDS_DESCRIPTION})]
"""The type of a request's list-of-ids field (see :func:`entity_ids`)."""
