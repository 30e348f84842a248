"""The one error serving raises for a question it cannot answer as asked."""

from __future__ import annotations

__all__ = ["QueryError"]


class QueryError(ValueError):
    """A request serving refuses, with an HTTP status, a short code and a message that helps.

    >>> str(QueryError("unknown_view", "No view 'x'."))
    "No view 'x'."
    """

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
