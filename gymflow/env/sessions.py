"""Sessions of a resources server: explicit ids, one TTL, a cap, and remembered ends.

A session holds one task and the environment's per-session state. ``SessionStore`` keeps the
live ones in order of last use (every touch moves a session to the end); all sessions share
one TTL, so that is also the order of expiry and :meth:`SessionStore.expire` looks only at the
sessions that actually expired, not at every live one.

Memory is bounded in bytes, not only in count: live sessions are weighed by the size of the
request that seeded them (the task they hold) and refused past ``max_live_bytes``; ended ids
are remembered with how they ended (closed or expired) up to ``max_closed_bytes``, oldest
forgotten first, so a late call on an ended session gets the right kind (``session_closed`` /
``session_expired``) and an id is never seeded twice. Only ids that were live are remembered:
closing an id nobody seeded changes nothing. Server-issued ids are random (128 bits), so they
never collide with a forgotten one and cannot be guessed.
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
    weight: int = 0
    """Bytes this session is counted as holding (the size of its seed request)."""
    tool_calls: int = 0
    log: list[dict] = field(default_factory=list)


class RequestError(Exception):
    """A refused request: HTTP status, failure kind and a message for a person."""

    def __init__(self, status: int, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


class SessionStore:
    ENDED_ID_OVERHEAD = 100
    """Bytes an ended id costs beyond its characters (dict slot, string header), roughly."""

    def __init__(
        self,
        ttl_s: float,
        max_sessions: int,
        max_live_bytes: int = 1 << 30,
        max_closed_bytes: int = 32 << 20,
    ) -> None:
        self.ttl_s, self.max_sessions = ttl_s, max_sessions
        self.max_live_bytes, self.max_closed_bytes = max_live_bytes, max_closed_bytes
        self.live: dict[str, Session] = {}
        self.live_bytes = 0
        self.closed: dict[str, Ending] = {}  # insertion-ordered: the oldest ended id first
        self.closed_bytes = 0

    def add(self, session_id: str, session: Session) -> None:
        self.expire()
        if session_id in self.closed or session_id in self.live:
            raise RequestError(
                409, FailureKind.SESSION_EXISTS, f"session {session_id} is in use or was used"
            )
        if len(self.live) >= self.max_sessions:
            raise RequestError(
                429,
                FailureKind.SESSION_LIMIT,
                f"session cap {self.max_sessions} reached; close sessions or raise the cap",
            )
        if self.live_bytes + session.weight > self.max_live_bytes:
            raise RequestError(
                429,
                FailureKind.SESSION_LIMIT,
                f"live sessions hold {self.live_bytes} bytes (cap {self.max_live_bytes}); "
                "close sessions or raise the cap",
            )
        self.live[session_id] = session
        self.live_bytes += session.weight

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
        session = self.live.pop(session_id, None)
        if session is None:
            return False  # never seeded, or already ended: nothing to remember
        self.live_bytes -= session.weight
        self.closed[session_id] = ending
        self.closed_bytes += len(session_id) + self.ENDED_ID_OVERHEAD
        while self.closed_bytes > self.max_closed_bytes and self.closed:
            oldest = next(iter(self.closed))
            del self.closed[oldest]
            self.closed_bytes -= len(oldest) + self.ENDED_ID_OVERHEAD
        return True
