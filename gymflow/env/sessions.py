"""Sessions of a resources server: explicit ids, one TTL, a cap, and remembered ends.

A session holds one task and the environment's per-session state. ``SessionStore`` keeps the
live ones in order of last use (every touch moves a session to the end); all sessions share
one TTL, so that is also the order of expiry and :meth:`SessionStore.expire` looks only at the
sessions that actually expired, not at every live one.

Ended ids are remembered with how they ended (closed or expired) up to ``max_closed``, oldest
forgotten first, so a long-running server's memory stays bounded while a late call on an ended
session gets the right kind (``session_closed`` / ``session_expired``), and an id is never
seeded twice. Random session ids never collide with a forgotten one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from gymflow.core.failures import FailureKind
from gymflow.core.task_record import Task

Ending = Literal["closed", "expired"]


@dataclass
class Session:
    task: Task
    state: Any
    expires_at: float
    tool_calls: int = 0
    log: list[dict] = field(default_factory=list)


class RequestError(Exception):
    """A refused request: HTTP status, failure kind and a message for a person."""

    def __init__(self, status: int, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class SessionStore:
    def __init__(self, ttl_s: float, max_sessions: int, max_closed: int = 200_000) -> None:
        self.ttl_s, self.max_sessions, self.max_closed = ttl_s, max_sessions, max_closed
        self.live: dict[str, Session] = {}
        self.closed: dict[str, Ending] = {}  # insertion-ordered: the oldest ended id first

    def add(self, session_id: str, session: Session) -> None:
        self.expire()
        if session_id in self.closed or session_id in self.live:
            raise RequestError(
                409, FailureKind.SESSION_CLOSED, f"session {session_id} was already used"
            )
        if len(self.live) >= self.max_sessions:
            raise RequestError(
                429,
                FailureKind.SESSION_LIMIT,
                f"session cap {self.max_sessions} reached; close sessions or raise the cap",
            )
        self.live[session_id] = session

    def get(self, session_id: str) -> Session:
        session = self.live.get(session_id)
        now = time.monotonic()
        if session is None or session.expires_at < now:
            if session is not None:
                self._end(session_id, "expired")
            ending = self.closed.get(session_id)
            if ending == "expired":
                raise RequestError(
                    404,
                    FailureKind.SESSION_EXPIRED,
                    f"session {session_id} expired after {self.ttl_s:g} s without use",
                )
            if ending == "closed":
                raise RequestError(404, FailureKind.SESSION_CLOSED, f"session {session_id} closed")
            raise RequestError(404, FailureKind.UNKNOWN_SESSION, f"no session {session_id}")
        session.expires_at = now + self.ttl_s
        self.live[session_id] = self.live.pop(session_id)  # most recently used goes last
        return session

    def close(self, session_id: str) -> bool:
        """End a session (idempotent); True if it was live."""
        return self._end(session_id, "closed")

    def expire(self) -> None:
        now = time.monotonic()
        expired = []
        for sid, session in self.live.items():
            if session.expires_at >= now:
                break
            expired.append(sid)
        for sid in expired:
            self._end(sid, "expired")

    def _end(self, session_id: str, ending: Ending) -> bool:
        was_live = self.live.pop(session_id, None) is not None
        if was_live or session_id not in self.closed:
            self.closed[session_id] = ending
        if len(self.closed) > self.max_closed:
            del self.closed[next(iter(self.closed))]
        return was_live
