"""Structured logging: one JSON object per line, on stderr.

Every service and job calls :func:`configure_logging` once at its entry point
and then logs with ``get_logger(__name__).info("event", extra={"fields": {...}})``
or the shorter :func:`log_event`.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["JsonFormatter", "configure_logging", "get_logger", "log_event"]


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, event and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str = "INFO") -> None:
    """Send the root logger's records to stderr as JSON lines (idempotent)."""
    root = logging.getLogger()
    root.setLevel(level)
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
    for noisy in ("py4j", "cassandra", "urllib3", "httpx", "httpcore", "great_expectations"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(name)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log ``event`` with structured ``fields``: ``log_event(log, "started", port=9092)``."""
    logger.log(level, event, extra={"fields": fields})
