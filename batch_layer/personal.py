"""Personal ids in a step's arguments, and how logs and answers leave them out.

``forget --user ID`` is the one step argument that names a person. The step
server, the DAGs' operator and Airflow's task logs show a step's arguments
with :func:`redact_args` and scrub its log lines with :func:`scrub`; no
Spark or Airflow import, so both venvs use it.

>>> redact_args(["forget", "--pipeline", "web_events", "--user", "user-42"])
['forget', '--pipeline', 'web_events', '--user', '[redacted]']
>>> redact_args(["forget", "--user=user-42"])
['forget', '--user=[redacted]']
>>> personal_values(["forget", "--user", "user-42"])
('user-42',)
>>> scrub('{"error": "no rows of user-42"}', ("user-42",))
'{"error": "no rows of [redacted]"}'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["PERSONAL_OPTIONS", "REDACTED", "personal_values", "redact_args", "scrub", "scrub_all"]

PERSONAL_OPTIONS = ("--user",)
"""Options of ``python -m batch_layer`` whose value names a person."""
REDACTED = "[redacted]"


def _split(arg: str) -> tuple[str, str] | None:
    option, equals, value = arg.partition("=")
    return (option, value) if equals and option in PERSONAL_OPTIONS else None


def personal_values(argv: Sequence[str]) -> tuple[str, ...]:
    """The values of the personal options in ``argv`` (``--user ID`` or ``--user=ID``)."""
    found = []
    for i, arg in enumerate(argv):
        if arg in PERSONAL_OPTIONS and i + 1 < len(argv):
            found.append(argv[i + 1])
        elif (split := _split(arg)) is not None:
            found.append(split[1])
    return tuple(v for v in found if v)


def redact_args(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of every personal option replaced by :data:`REDACTED`."""
    shown = list(argv)
    for i, arg in enumerate(shown):
        if arg in PERSONAL_OPTIONS and i + 1 < len(shown):
            shown[i + 1] = REDACTED
        elif (split := _split(arg)) is not None:
            shown[i] = f"{split[0]}={REDACTED}"
    return shown


def scrub(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of ``values`` (each a whole word) replaced by
    :data:`REDACTED`: ``user-42`` goes, ``user-420`` and ``my-user-42`` stay."""
    for value in sorted(set(values), key=len, reverse=True):
        if value:
            text = re.sub(rf"(?<![\w-]){re.escape(value)}(?![\w-])", REDACTED, text)
    return text


def scrub_all(value: Any, values: Iterable[str]) -> Any:
    """:func:`scrub` over every string of a JSON-like value (dicts, lists, tuples)."""
    values = tuple(values)
    if isinstance(value, str):
        return scrub(value, values)
    if isinstance(value, dict):
        return {scrub_all(k, values): scrub_all(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_all(item, values) for item in value]
    return value
