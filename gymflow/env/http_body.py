"""A request body read as JSON with a cap: the one reader of gymflow's servers' bodies.

Streamed, so an oversized body is drained and dropped, never held in memory: over
``max_bytes`` it is 413 ``payload_too_large``; bytes that are not UTF-8 are 400 ``not_utf8``;
text that is not JSON — or that the decoder cannot hold (nesting too deep, a number too large)
— is 400 ``invalid_json``. The caller picks the decoder: the resources server reads numbers as
Python's ``json`` does (a model's 100-digit integer is its mistake to score, not a transport
error), the agent servers use orjson (:mod:`gymflow.core.fast_json`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from gymflow.core.failures import FailureKind
from gymflow.env.sessions import RequestError


async def read_json(
    request: Request, max_bytes: int, loads: Callable[[str], Any] = json.loads
) -> tuple[Any, int]:
    """``(the body decoded, its size in bytes)``; raises :class:`RequestError` as above."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= max_bytes:
            chunks.append(chunk)
        else:
            chunks.clear()
    if size > max_bytes:
        raise RequestError(
            413, FailureKind.PAYLOAD_TOO_LARGE, f"body of {size} bytes > {max_bytes}"
        )
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(
            400, FailureKind.NOT_UTF8, f"body is not UTF-8 at byte {exc.start}"
        ) from None
    try:
        return loads(text), size
    except json.JSONDecodeError as exc:
        raise RequestError(400, FailureKind.INVALID_JSON, f"body is not JSON: {exc.msg}") from None
    except RecursionError:
        raise RequestError(
            400, FailureKind.INVALID_JSON, "body is not JSON: nested too deeply"
        ) from None
    except ValueError as exc:  # an integer of more digits than the decoder converts
        raise RequestError(400, FailureKind.INVALID_JSON, f"body is not JSON: {exc}") from None
