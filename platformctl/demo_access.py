"""The demo's teams: two analysts issued their own tokens, each reading its team's pipelines
only (the serving API's views and the SQL server's catalog), one refused another team's
view over HTTP and over SQL, every read in the audit, the tokens revoked.

As an operator would do it with ``platformctl access issue``/``revoke``; the answers
come from the running serving process and SQL server, the audit rows from the audit topic.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from core.settings import Settings

__all__ = ["say_access"]

_ANALYSTS = (("web", "web-analytics"), ("shop", "shop-data"))


def _say(text: str) -> None:
    print(f"[access] {text}", flush=True)


def say_access(settings: Settings) -> None:
    from access.audit import read_records
    from access.store import TokenStore
    from core.cassandra import connect

    run = uuid.uuid4().hex[:6]
    host = "127.0.0.1" if settings.serving.host == "0.0.0.0" else settings.serving.host
    base = f"http://{host}:{settings.serving.port}"
    cluster, session = connect(settings.cassandra, schema=False)
    try:
        store = TokenStore(session, settings.cassandra.keyspace)
        tokens = {
            f"{who}-analyst-{run}": (team, store.issue(f"{who}-analyst-{run}", [team]).text)
            for who, team in _ANALYSTS
        }
        _say(
            "issued (platformctl access issue --name ... --team ...): "
            + ", ".join(f"{name} of {team}" for name, (team, _) in tokens.items())
        )
        with httpx.Client(base_url=base, timeout=30) as client:
            for name, (team, token) in tokens.items():
                views = _until_known(client, token)
                pipelines = sorted({v["pipeline"] for v in views})
                _say(f"{name} ({team}) sees pipelines {pipelines}: {[v['view'] for v in views]}")
            for name, (team, token) in tokens.items():
                _say(f"{name} ({team}) SQL catalog (SHOW VIEWS): {_sql_catalog(settings, token)}")
            web, shop = (token for _, token in tokens.values())
            sql = client.post(
                "/v1/sql",
                json={"sql": "SELECT count(*) FROM gold_orders_by_currency"},
                headers={"Authorization": f"Bearer {web}"},
            )
            _say(
                f"the web analyst asks the shop's gold table over /v1/sql: {sql.status_code} "
                f"{sql.json().get('message')}"
            )
            refused = client.get(
                "/v1/top?view=orders_by_currency&measure=revenue_minor",
                headers={"Authorization": f"Bearer {web}"},
            )
            _say(
                f"the web analyst asks for the shop's revenue: {refused.status_code} "
                f"{refused.json().get('message')}"
            )
            for name in tokens:
                store.revoke(name)
            time.sleep(settings.access.refresh_s + 1)
            after = client.get("/v1/views", headers={"Authorization": f"Bearer {shop}"})
            _say(
                f"both tokens revoked (platformctl access revoke NAME): the shop analyst now "
                f"gets {after.status_code}"
            )
    finally:
        cluster.shutdown()
    for row in read_records(settings, set(tokens), timeout_s=20):
        _say(
            f"audit {row['identity']:<22} {row['action']:<15} {','.join(row['views']) or '-':<20} "
            f"{row['outcome']:<8} {row['reason'] or ''}"
        )


def _sql_catalog(settings: Settings, token: str, timeout_s: float = 10) -> list[str]:
    """The views the token's holder sees on the SQL server over Spark Connect, once the server
    has read the token (within ``access.refresh_s``)."""
    from serving.connect.remote import close_session, remote_session

    base = settings.sql.url().split(";token=", 1)[0]
    deadline = time.monotonic() + timeout_s
    while True:
        spark = remote_session(f"{base};token={token}")
        try:
            return sorted(row.viewName for row in spark.sql("SHOW VIEWS").collect())
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            close_session(spark)


def _until_known(client: httpx.Client, token: str, timeout_s: float = 10) -> list[dict[str, Any]]:
    """``/v1/views`` as the token's holder sees it, once serving has read the token."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = client.get("/v1/views", headers={"Authorization": f"Bearer {token}"})
        if answer.status_code == 200 or time.monotonic() > deadline:
            answer.raise_for_status()
            return answer.json()
        time.sleep(0.5)
