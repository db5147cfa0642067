"""Fault-injecting ASGI wrappers shared by the collector tests (real apps, one route broken)."""

from __future__ import annotations


def refusing_seed(app, bad_task_id: str):
    """``app``, except ``/seed_session`` answers 503 for one task (an env down for it alone)."""

    async def picky(scope, receive, send):
        if scope["path"] == "/seed_session":
            message = await receive()
            if bad_task_id.encode() in message["body"]:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"down"})
                return
            replay = iter([message])

            async def again():
                return next(replay, None) or await receive()

            return await app(scope, again, send)
        return await app(scope, receive, send)

    return picky
