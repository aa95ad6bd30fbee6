"""The components' log format: plain text by default, one JSON object a line with
`HUMANWORK_LOG_FORMAT=json` (fields `time`, `level`, `logger`, `message`, `exception` when
there is one, and `trace_id` when a span is current, so a log line finds its trace)."""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime

from humanwork_core import tracing

PLAIN = "%(asctime)s %(levelname)s %(name)s %(message)s"


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object, with the current trace id."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        trace_id = tracing.current_trace_id()
        if trace_id:
            line["trace_id"] = trace_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: int = logging.INFO) -> None:
    """Configure the root logger in the format `HUMANWORK_LOG_FORMAT` names."""
    if os.environ.get("HUMANWORK_LOG_FORMAT", "").strip().lower() == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level, handlers=[handler], force=True)
    else:
        logging.basicConfig(level=level, format=PLAIN)
