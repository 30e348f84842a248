"""Serving answers each identity only the views its teams may read, and audits every read.

The app runs in this process on a store of known rows (``tests/support/serving_app.py``),
on both paths (the hot path and the framework); identities are issued tokens of two
teams, read from a token table the test holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import orjson
import pytest

from access import Directory
from access.audit import AuditLog, AuditRecord
from access.store import Issued
from access.tokens import new_token
from core.settings import ServingSettings, Settings
from pipelines import PIPELINES, pipeline
from serving.app import create_app
from serving.gate import Gate
from tests.support.serving_app import TOKEN, Apps, queries_of


def _read_by(team: str) -> list:
    """The declared pipelines ``team`` owns or is a declared reader of (any added later too)."""
    return [p for p in PIPELINES if team in (p.owner, *p.readers)]


WEB_VIEWS = tuple(v for p in _read_by("web-analytics") for v in p.views)
SITE = "/v1/timeseries?view=site_activity&start=now-60m&end=now&measure=events"
ORDERS = "/v1/timeseries?view=orders_by_currency&key=EUR&start=now-60m&end=now"


class _Tokens:
    def __init__(self) -> None:
        self.issued: list[Issued] = []

    def issue(self, name: str, *teams: str) -> str:
        token = new_token()
        now = datetime.now(UTC)
        self.issued.append(Issued(token.id, token.digest, name, frozenset(teams), now, None, None))
        return token.text

    def all(self) -> list[Issued]:
        return list(self.issued)


class _Kept(AuditLog):
    """The audit records, kept for the test (the log line is written as in production)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings, kafka=False)
        self.records: list[AuditRecord] = []

    def record(self, record: AuditRecord) -> None:
        super().record(record)
        self.records.append(record)


@pytest.fixture
def served() -> Iterator[tuple[Apps, _Tokens, _Kept]]:
    base = Settings()
    settings = base.model_copy(
        update={
            "serving": ServingSettings(**base.serving.model_dump() | {"api_tokens": {"t": TOKEN}})
        }
    )
    tokens, audit = _Tokens(), _Kept(settings)
    directory = Directory(settings, tokens)  # type: ignore[arg-type]
    queries = queries_of()
    apps = Apps(
        create_app(settings, queries, Gate(directory, audit)),
        create_app(
            settings.model_copy(
                update={"serving": settings.serving.model_copy(update={"hot_path": False})}
            ),
            queries,
            Gate(directory, audit),
        ),
    )
    apps.directory = directory  # type: ignore[attr-defined]
    contexts = [app.router.lifespan_context(app) for app in (apps.hot, apps.framework)]
    for context in contexts:
        apps.loop.run_until_complete(context.__aenter__())
    yield apps, tokens, audit
    for context in contexts:
        apps.loop.run_until_complete(context.__aexit__(None, None, None))
    apps.loop.close()


def _bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


def test_each_team_is_answered_its_own_pipelines_views_only(served) -> None:
    apps, tokens, _ = served
    web, shop = tokens.issue("ana", "web-analytics"), tokens.issue("bo", "shop-data")
    apps.directory.refresh()
    for app in (apps.hot, apps.framework):
        listed = orjson.loads(apps.call(app, "/v1/views", _bearer(web))[2])
        assert {v["view"] for v in listed} == set(WEB_VIEWS)
        assert {v["pipeline"] for v in listed} >= {"web_events"}
        listed = orjson.loads(apps.call(app, "/v1/views", _bearer(shop))[2])
        assert {v["view"] for v in listed} == {v for p in _read_by("shop-data") for v in p.views}
        assert {v["pipeline"] for v in listed} >= {"checkouts"}
        assert not {v["view"] for v in listed} & set(pipeline("web_events").views)
        assert apps.call(app, SITE, _bearer(web))[0] == 200
        assert apps.call(app, ORDERS, _bearer(shop))[0] == 200


def test_another_team_s_view_and_a_view_that_does_not_exist_are_refused_alike(served) -> None:
    apps, tokens, _ = served
    web, shop = tokens.issue("ana", "web-analytics"), tokens.issue("bo", "shop-data")
    apps.directory.refresh()
    for app in (apps.hot, apps.framework):
        other = apps.call(app, ORDERS, _bearer(web))
        missing = apps.call(app, ORDERS.replace("orders_by_currency", "payroll"), _bearer(web))
        assert other[0] == missing[0] == 403
        said = orjson.loads(other[2])["message"]
        assert said.startswith("View 'orders_by_currency' is not granted to ana; the views it ")
        assert "page_activity" in said and "orders_by_currency," not in said
        assert orjson.loads(missing[2])["message"] == said.replace("orders_by_currency", "payroll")
        assert apps.call(app, "/v1/reach", _bearer(shop))[0] == 403  # the site's reach


def test_an_identity_with_no_grants_gets_an_empty_catalog_and_no_token_gets_401(served) -> None:
    apps, tokens, _ = served
    nobody = tokens.issue("cy")
    apps.directory.refresh()
    assert orjson.loads(apps.call(apps.framework, "/v1/views", _bearer(nobody))[2]) == []
    assert apps.call(apps.hot, SITE, _bearer("wap.000000000000." + "A" * 43))[0] == 401
    assert apps.call(apps.hot, SITE, [])[0] == 401


def test_every_read_is_audited_with_who_what_outcome_and_rows(served) -> None:
    apps, tokens, audit = served
    web = tokens.issue("ana-7f3a", "web-analytics")
    apps.directory.refresh()
    asked = [(apps.hot, SITE), (apps.hot, SITE), (apps.framework, ORDERS), (apps.hot, "/v1/views")]
    answers = [apps.call(app, path, _bearer(web)) for app, path in asked]
    statuses = [answer[0] for answer in answers]
    apps.call(apps.hot, SITE, _bearer("not-a-token"))
    assert statuses == [200, 200, 403, 200]
    got = [(r.identity, r.action, r.views, r.outcome) for r in audit.records]
    assert got == [
        ("ana-7f3a", "/v1/timeseries", ("site_activity",), "ok"),
        ("ana-7f3a", "/v1/timeseries", ("site_activity",), "ok"),
        ("ana-7f3a", "/v1/timeseries", ("orders_by_currency",), "refused"),
        ("ana-7f3a", "/v1/views", WEB_VIEWS, "ok"),
        ("anonymous", "/v1/timeseries", (), "refused"),
    ]
    site = audit.records[0]
    buckets = sum(len(s["buckets"]) for s in orjson.loads(answers[0][2])["series"])
    assert site.rows == buckets > 0 and site.teams == ("web-analytics",) and site.duration_ms > 0
    assert audit.records[2].reason.startswith("not_granted")
    assert audit.records[-1].reason == "unauthenticated"
    assert all("EUR" not in orjson.dumps(r.row()).decode() for r in audit.records)
    hot, framework = (
        apps.call(app, "/metrics", _bearer(TOKEN))[2].decode() for app in (apps.hot, apps.framework)
    )
    reads = 'wap_serving_reads_total{outcome="%s",teams="%s"} %s'
    assert reads % ("ok", "web-analytics", "3.0") in hot  # its two timeseries and the views
    assert reads % ("refused unauthenticated", "none", "1.0") in hot
    assert reads % ("refused not_granted", "web-analytics", "1.0") in framework
    assert "ana-7f3a" not in hot + framework  # teams, never names
