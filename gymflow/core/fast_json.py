"""JSON bytes for the request path: orjson, falling back to json for what orjson refuses.

orjson is several times faster than ``json`` both ways, which shows at thousands of requests
a second; it refuses ints over 64 bits and non-string keys, which ``json`` still writes.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

loads = orjson.loads
"""bytes/str -> object; raises ``orjson.JSONDecodeError`` (a ``ValueError``), also on bad UTF-8."""


def dumps(content: Any) -> bytes:
    try:
        return orjson.dumps(content)
    except TypeError:
        return json.dumps(content, ensure_ascii=False, default=str).encode()
