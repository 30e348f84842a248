"""A thin Python client of the serving API.

>>> client = ServingClient("http://127.0.0.1:8090", token="local-dev-read-token")
>>> client.base_url
'http://127.0.0.1:8090'

Every method returns the API's JSON answer as a dict; an error answer raises
:class:`ServingAPIError` with the API's message.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["ServingAPIError", "ServingClient"]


class ServingAPIError(RuntimeError):
    """The API refused a question; ``status`` and ``code`` say how, the message why."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


class ServingClient:
    """Ask the serving API questions; use as a context manager or call :meth:`close`."""

    def __init__(self, base_url: str, token: str, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def __enter__(self) -> ServingClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        clean = {k: v for k, v in params.items() if v is not None}
        answer = self._http.get(path, params=clean)
        if answer.status_code != 200:
            try:
                body = answer.json()
            except ValueError:
                body = {"error": "http_error", "message": answer.text[:500]}
            raise ServingAPIError(answer.status_code, body.get("error"), body.get("message"))
        return answer.json()

    def timeseries(
        self,
        view: str,
        keys: list[str] | str | None = None,
        start: str = "now-1h",
        end: str = "now",
        granularity: str = "minute",
    ) -> dict[str, Any]:
        """Merged buckets per key (``keys``: one value or a list; the site view needs none)."""
        key = [keys] if isinstance(keys, str) else keys
        return self._get(
            "/v1/timeseries",
            {"view": view, "key": key, "start": start, "end": end, "granularity": granularity},
        )

    def top(
        self,
        view: str,
        measure: str,
        start: str = "now-1h",
        end: str = "now",
        n: int = 10,
        quantile: float | None = None,
        min_samples: int | None = None,
    ) -> dict[str, Any]:
        """The top ``n`` keys by merged ``measure`` (a kll measure ranks by ``quantile``)."""
        return self._get(
            "/v1/top",
            {
                "view": view,
                "measure": measure,
                "start": start,
                "end": end,
                "n": n,
                "quantile": quantile,
                "min_samples": min_samples,
            },
        )

    def reach(
        self, page: str | None = None, start: str = "now-1h", end: str = "now"
    ) -> dict[str, Any]:
        """Distinct visitors of a page (``page``) or of the whole site (no page)."""
        view = "site_activity" if page is None else "page_activity"
        return self._get("/v1/reach", {"view": view, "key": page, "start": start, "end": end})

    def health(self) -> dict[str, Any]:
        """Boundary and freshness per view."""
        return self._get("/health", {})
