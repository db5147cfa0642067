"""A logging handler that keeps every record's message, for tests that check what a library logs."""

from __future__ import annotations

import logging


class LogRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
