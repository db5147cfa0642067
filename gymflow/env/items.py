"""The shape of a trajectory a client sends to ``/verify``: Responses-style items, checked
before any verifier reads them.

A verifier is written for the items the agent loop builds (messages, function calls, their
outputs); a client may send anything. Items that are not of that shape — a call id that is a
list, a message without a string content, an unknown item type — are the sender's mistake,
so the server scores them ``invalid_trajectory`` (:func:`check_items` names the first
problem) instead of letting a verifier crash on them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class _Item(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class MessageItem(_Item):
    type: Literal["message"]
    role: str
    content: str


class FunctionCallItem(_Item):
    type: Literal["function_call"]
    name: str
    arguments: str
    call_id: str


class FunctionCallOutputItem(_Item):
    type: Literal["function_call_output"]
    call_id: str
    output: str


Item = Annotated[
    MessageItem | FunctionCallItem | FunctionCallOutputItem, Field(discriminator="type")
]
_ITEMS = TypeAdapter(list[Item])


def check_items(items: object) -> str | None:
    """``None`` for a well-formed trajectory, else one line naming the first bad item."""
    try:
        _ITEMS.validate_python(items)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][:2])
        return f"items.{where}: {first['msg']}" if where else f"items: {first['msg']}"
    return None
