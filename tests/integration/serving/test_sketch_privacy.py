"""The views' sketches on the SQL server tell no analyst who is in them.

A lake of its own, under a key of its own (``views.identity_key``, random): web
events through the real batch pipeline (published, so ``serving_page_activity``
is gold before its boundary), the checkout service's records through the batch
steps up to gold (``gold_orders_by_currency``) and through the real speed
layer (``serving_orders_by_currency``: speed rows only, nothing published). A
real ``python -m serving.connect`` serves it, started as ``platformctl`` starts
it (without the key). An analyst's script (``sketch_attacks.py``, in the
analyst's virtualenv: ``pyspark-client`` only) unions a sketch of every
candidate id the simulators can produce (``buyer-0000`` ... ``buyer-0299``,
``user-000000`` ...) with every window's sketch and looks for an estimate that
does not move. It finds no one. The control: given the candidates' keyed
digests, which only the key's holder can compute (this test, never the
analyst), the same script finds exactly the buyers of each window and the
users who viewed pages, so the method is sound and only the key is missing.
The key is in no process of the SQL server and in no file of the lake (Delta
history included) or of the lineage.
"""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.settings import Settings
from core.view_settings import ViewSettings
from tests.support.analyst import run_analyst_script
from tests.support.cassandra import SCHEMA_TIMEOUT_S
from tests.support.processes import children
from tests.support.sql import sql_settings

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]

ATTACKER = Path(__file__).with_name("sketch_attacks.py")
LIMIT = {"time_limit_s": 300.0}
"""A statement's time limit on this test's server: each of the analyst's joins a window's
sketches with a hundred candidates, on a machine other tests keep busy."""
USERS = 200
"""Browsers of the simulated site; half of them log in (``user-000000`` ...)."""
BUYERS = 300
"""Buyers of the simulated checkout service (``buyer-0000`` ... ``buyer-0299``)."""
SHOP_START = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=3)
"""The checkouts are recent: the speed rows' lifetime (3 days) bounds what the SQL server
reads of them."""


@pytest.fixture(scope="module")
def private_lake(local_platform: Settings, spark, tmp_path_factory):
    """Settings of a lake, keyspace and topics of their own under a random identity key; web
    events of 2024 published, the last hours' checkouts in gold and in the speed layer.
    Yields (settings, the valid web events, the checkouts' truth)."""
    from confluent_kafka.admin import AdminClient

    from batch_layer.runner import run_step
    from batch_layer.steps import THROUGH_PUBLISH
    from core.cassandra import connect, ensure_keyspace
    from core.settings import BatchSettings, KafkaSettings, LakeSettings
    from core.spark import local_spark_jars
    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct
    from ingest.topics import ensure_topics, pipeline_topics, platform_topics
    from layout import create_statements
    from pipelines import collector_pipeline, pipeline
    from pipelines.simulators import checkouts
    from tests.support.speed import SpeedJob

    root = tmp_path_factory.mktemp("private_lake")
    keyspace = f"t_private_{uuid.uuid4().hex[:8]}"
    topic = keyspace.replace("_", "-")
    kafka = KafkaSettings(
        **local_platform.kafka.model_dump()
        | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq", "partitions": 2}
        | {"suppressions_topic": f"{topic}.suppressions"}
        | {"topics": {"checkouts": f"{topic}.checkouts"}}
    )
    settings = local_platform.model_copy(
        update={
            "kafka": kafka,
            "cassandra": local_platform.cassandra.model_copy(update={"keyspace": keyspace}),
            "speed": local_platform.speed.model_copy(update={"pipelines": ["checkouts"]}),
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "cp")),
            "batch": BatchSettings(reports_dir=root / "quality", lateness_s=60),
            "spark": local_platform.spark.model_copy(
                update={"jars": local_spark_jars(local_platform.local.state_dir)}
            ),
            "views": ViewSettings(identity_key=secrets.token_hex(32)),
        }
    )
    web, shop = collector_pipeline(), pipeline("checkouts")
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, [*platform_topics(kafka), *pipeline_topics(kafka, [shop])])
    cluster, session = connect(settings.cassandra)
    ensure_keyspace(session, keyspace, {"class": "SimpleStrategy", "replication_factor": 1})
    for statement in create_statements(keyspace, settings.speed.ttl_s):
        session.execute(statement)
    events = generate(
        SimulatorConfig(
            seed=43,
            events=500,
            rate=0.2,
            users=USERS,
            known_user_rate=0.5,
            start=datetime(2024, 3, 5, 9, 0, tzinfo=UTC),
            duplicate_rate=0.02,
            invalid_rate=0.02,
        )
    )
    produce_direct(events, settings)
    records = checkouts.generate(
        checkouts.CheckoutConfig(
            seed=17,
            events=400,
            buyers=BUYERS,
            start=SHOP_START,
            rate=1.0,
            refund_rate=0.1,
            duplicate_rate=0.03,
            late_rate=0.0,  # none beyond the speed layer's watermark: both layers see all
            out_of_order_rate=0.0,
            invalid_rate=0.02,
        )
    )
    checkouts.produce(records, kafka.client_config(), shop.topic_of(settings))
    for step in THROUGH_PUBLISH:
        run_step(spark, settings, step, web, "private-1", None)
    for step in THROUGH_PUBLISH[: THROUGH_PUBLISH.index("publish")]:  # gold, never published
        run_step(spark, settings, step, shop, "private-1", None)
    SpeedJob(spark).drain(settings)
    seen, valid = set(), []
    for event in events:
        if event.defect is None and event.message_id not in seen:
            seen.add(event.message_id)
            valid.append(event)
    yield settings, valid, checkouts.build_truth(records)
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic])
    admin.delete_topics([shop.topic_of(settings)])
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=SCHEMA_TIMEOUT_S)
    cluster.shutdown()


@pytest.fixture(scope="module")
def sql_server(private_lake, start_sql_server, tmp_path_factory):
    """The SQL server over the private lake, with the settings ``platformctl`` gives it."""
    from platformctl.services.sql import without_identity_key

    settings, _, _ = private_lake
    state = tmp_path_factory.mktemp("private_sql") / "state"
    served = sql_settings(without_identity_key(settings), state)
    # The analyst tries every candidate against every window: minutes of work, not seconds.
    served = served.model_copy(update={"sql": served.sql.model_copy(update=LIMIT)})
    server = start_sql_server(served)
    yield server
    server.stop()


def _attack(python: Path, server, folder: Path, probes: list[dict]) -> list[dict]:
    """The analyst's script over ``probes``: per probe, its rows and what it found."""
    job = {"url": server.settings.sql.url(), "probes": probes}
    path = folder / f"probes-{uuid.uuid4().hex[:6]}.json"
    return run_analyst_script(python, ATTACKER, path, job, timeout_s=1200)


def _probe(table: str, measure: str, keys: list[str], candidates: dict) -> dict:
    return {"table": table, "measure": measure, "keys": keys, "candidates": candidates}


BUYER_IDS = {"prefix": "buyer-", "width": 4, "count": BUYERS}
USER_IDS = {"prefix": "user-", "width": 6, "count": USERS}
TARGETS = [
    ("gold_orders_by_currency", "buyers", ["currency"], BUYER_IDS),
    ("serving_orders_by_currency", "buyers", ["currency"], BUYER_IDS),
    ("gold_page_activity", "visitors", ["path"], USER_IDS),
    ("serving_page_activity", "visitors", ["path"], USER_IDS),
    ("gold_site_activity", "visitors", ["site"], USER_IDS),
]


def _ids(candidates: dict) -> list[str]:
    return [
        f"{candidates['prefix']}{n:0{candidates['width']}d}" for n in range(candidates["count"])
    ]


def test_no_candidate_id_is_found_in_any_sketch(sql_server, client_python, tmp_path):
    answers = _attack(client_python, sql_server, tmp_path, [_probe(*t) for t in TARGETS])
    for (table, *_), answer in zip(TARGETS, answers, strict=True):
        assert answer["rows"] > 0, f"{table} holds no sketch: the test would pass vacuously"
        assert answer["found"] == [], f"{table}: {len(answer['found'])} candidates found"


def test_the_same_test_given_the_keyed_digests_finds_every_member(
    private_lake, sql_server, client_python, tmp_path
):
    from views.digest import keyed_digest

    settings, valid, truth = private_lake
    key = settings.views.identity_key.get_secret_value().encode()
    named = {keyed_digest(key, i): i for c in (BUYER_IDS, USER_IDS) for i in _ids(c)}
    buyers = {"ids": [d for d, i in named.items() if i.startswith("buyer-")]}
    users = {"ids": [d for d, i in named.items() if i.startswith("user-")]}
    probes = [
        _probe("gold_orders_by_currency", "buyers", ["currency"], buyers),
        _probe("serving_orders_by_currency", "buyers", ["currency"], buyers),
        _probe("gold_page_activity", "visitors", ["path"], users),
    ]
    gold, speed, pages = _attack(client_python, sql_server, tmp_path, probes)
    bought = {
        (f"{minute[:10]} {minute[11:19]}", currency, buyer)
        for (minute, currency), cell in truth.by_minute.items()
        for buyer in cell.buyers
    }
    assert len(bought) > 100
    assert {(w, c, named[d]) for w, c, d in gold["found"]} == bought
    assert {(w, c, named[d]) for w, c, d in speed["found"]} == bought
    viewers = {
        e.payload["userId"]
        for e in valid
        if e.payload["type"] == "page" and e.payload.get("userId")
    }
    assert len(viewers) > 10
    assert {named[d] for _, _, d in pages["found"]} == viewers


def test_the_key_is_in_no_sql_server_process_and_no_file_of_the_lake(private_lake, sql_server):
    settings, _, _ = private_lake
    secret = settings.views.identity_key.get_secret_value().encode()
    pids = [sql_server.process.pid, *children(sql_server.process.pid)]
    for pid in pids:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert secret not in environ, f"the key is in the environment of SQL server pid {pid}"
        assert secret not in Path(f"/proc/{pid}/cmdline").read_bytes()
    files = [p for p in Path(settings.lake.root).rglob("*") if p.is_file()]
    assert any("_delta_log" in p.parts for p in files)
    for path in files:
        assert secret not in path.read_bytes(), f"the key is in {path}"
    lineage = Path(settings.lineage.location)
    if lineage.exists():
        assert secret not in lineage.read_bytes()
