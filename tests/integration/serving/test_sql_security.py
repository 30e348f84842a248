"""The SQL server attacked as a hostile analyst would, with nothing but an analyst's tools.

A real ``python -m serving.connect --supervise`` (the local ``sql`` service's
command) serves the SQL lake (``published_lake``: simulated traffic through the real
batch pipeline). An analyst's script (``sql_attacks.py``, in the analyst's virtualenv:
``pyspark-client`` and other tools from PyPI) replays each attack that once worked: code
run in the server, files written, one statement that hung the server, JDBC
connections, DESCRIBE and SHOW on any path, caching. Each must be refused with
a clear error, leave nothing on disk, and leave ``SELECT 1`` from another
session answering within seconds. Then ``/health`` and ``/metrics``, and a restart
when the server stops answering (the time limit, a fair share of the cores and a
statement whose client left: ``test_sql_limits.py``).
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from core.settings import Settings
from tests.support.lake import GROUP
from tests.support.ports import free_port
from tests.support.processes import alive, children, java_children
from tests.support.sql import SQL_TOKEN, run_attacker, sql_metrics

# One worker builds the session's published lake once for every module reading it.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.xdist_group(GROUP),
]

REFUSED = "Refused by the SQL server"
ANSWERS_WITHIN_S = 10.0
PROVIDER = """package attack;
public class Provider implements org.apache.spark.sql.sources.RelationProvider {
  static {
    try {
      java.nio.file.Files.writeString(java.nio.file.Path.of("%s"), "ran in the SQL server");
    } catch (Exception ignored) { }
  }
  public org.apache.spark.sql.sources.BaseRelation createRelation(
      org.apache.spark.sql.SQLContext context, scala.collection.immutable.Map<String, String> o) {
    return null;
  }
}
"""


@pytest.fixture(scope="module")
def serving_settings(serving_settings: Settings, sql_server) -> Settings:
    """The SQL server's settings (the published lake's), with this module's serving app."""
    return sql_server.settings.model_copy(update={"serving": serving_settings.serving})


@pytest.fixture(scope="module")
def listener():
    """An HTTP server on this machine that counts the requests it gets: a URL the attacks ask
    the SQL server to fetch."""
    hits: list[str] = []

    class Counting(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Counting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/schema.xsd", hits
    server.shutdown()


@pytest.fixture(scope="module")
def targets(serving_settings: Settings, tmp_path_factory, listener) -> dict:
    """What the attacks aim at: a jar whose data source writes a file when loaded, a file to
    copy and where to, Derby databases to create, silver's path and a path that is not, a URL
    that counts its requests."""
    import pyspark

    from layout.lake import silver_path

    folder = tmp_path_factory.mktemp("attacks")
    marker = folder / "code-ran-in-the-server.txt"
    source = folder / "src" / "attack" / "Provider.java"
    source.parent.mkdir(parents=True)
    source.write_text(PROVIDER % marker)
    classes = folder / "classes"
    javac = shutil.which("javac")
    assert javac, "javac (the JDK) builds the attacker's jar, as it builds the guard"
    jars = Path(pyspark.__file__).parent / "jars"
    subprocess.run(
        [javac, "-nowarn", "-d", classes, "-cp", f"{jars}/*", source], check=True, timeout=300
    )
    jar = folder / f"attack-{os.getpid()}.jar"
    shutil.make_archive(str(jar.with_suffix("")), "zip", classes)
    jar.with_suffix(".zip").rename(jar)
    (folder / "copy-source.txt").write_text("copied by an analyst")
    return {
        "folder": str(folder),
        "jar": str(jar),
        "provider": "attack.Provider",
        "marker": str(marker),
        "copy_source": str(folder / "copy-source.txt"),
        "copy_destination": str(folder / "copied-by-an-analyst.txt"),
        "derby": str(folder / "derby-read"),
        "derby_view": str(folder / "derby-view"),
        "derby_catalog": str(folder / "derby-catalog"),
        "silver": silver_path(serving_settings, serving_settings.kafka.events_topic),
        "missing": str(folder / "no-table-here"),
        "url_inside": listener[0],
    }


@pytest.fixture(scope="module")
def attacks(sql_server, client_python: Path, targets: dict, serving_settings: Settings) -> dict:
    """Every attack's answer (``sql_attacks.ATTACKS``), each followed by ``SELECT 1``; and
    ``server``: the supervisor's server process before and after them."""
    before = children(sql_server.process.pid)
    answers = run_attacker(
        client_python, serving_settings, Path(targets["folder"]), "attacks", **targets
    )
    return answers | {"server": {"before": before, "after": children(sql_server.process.pid)}}


def _refused(attacks: dict, *names: str, saying: str = "") -> None:
    for name in names:
        error = attacks[name]["error"]
        assert error and REFUSED in error, f"{name} was not refused: {attacks[name]}"
        assert saying in error, f"{name}: {error}"


# --- each attack refused, nothing left on disk ------------------------------------------------


def test_every_attack_leaves_the_server_answering_other_sessions(attacks):
    answers = {name: a for name, a in attacks.items() if name != "server"}
    slow = {name: a["select1_s"] for name, a in answers.items() if a["select1_s"] > 10}
    assert not slow, f"SELECT 1 from another session took longer than 10 s after {slow}"
    assert attacks["server"]["before"] == attacks["server"]["after"], "the server was restarted"


def test_client_code_never_runs_in_the_server(attacks, targets, sql_server):
    """Finding 1: a jar uploaded, then its data source class loaded by the server."""
    _refused(attacks, "add_jar", saying="artifacts")
    _refused(attacks, "load_provider", saying="data sources cannot be read")
    assert not Path(targets["marker"]).exists(), "the attacker's class ran in the SQL server"
    jar = Path(targets["jar"]).name
    places = [sql_server.settings.local.state_dir, *Path("/tmp").glob("spark-*")]
    copies = [
        Path(folder) / jar
        for place in places
        for folder, _, files in os.walk(place)  # Spark's scratch folders: an upload's staging
        if jar in files
    ]
    assert not copies, f"the uploaded jar is on the server's disk: {copies}"


def test_no_setting_opens_the_file_system_or_lifts_a_limit(attacks, targets):
    """Finding 2: SET opened copyFromLocalToFs to any path and lifted the CTE and row limits."""
    _refused(
        attacks,
        "sql_set_copy_local",
        "conf_set_copy_local",
        "set_cte_limit",
        "conf_set_row_limit",
        saying="cannot be set on the SQL server",
    )
    _refused(attacks, "copy_to_fs", saying="artifacts")
    assert not Path(targets["copy_destination"]).exists()
    _refused(attacks, "read_token", "read_warehouse", saying="is not readable")
    assert SQL_TOKEN not in json.dumps(attacks)
    assert attacks["set_time_zone"]["error"] is None
    assert attacks["set_time_zone"]["value"] == "UTC"


def test_a_statement_nested_20000_deep_is_refused_in_milliseconds(attacks):
    """Finding 3: SELECT ((((...1...)))) nested 20,000 deep exhausted the driver."""
    nested = attacks["nested_20000"]
    _refused(attacks, "nested_20000", saying="deeper than the SQL server's limit of 40")
    assert nested["seconds"] < 5, nested
    _refused(attacks, "nested_operators", saying="nested too deeply")
    assert attacks["nested_20000"]["select1_s"] < ANSWERS_WITHIN_S
    assert attacks["nested_operators"]["select1_s"] < ANSWERS_WITHIN_S


def test_a_statement_asking_for_more_partitions_than_the_limit_is_refused(attacks):
    """Finding 3: range(0, 4e9, 1, 20000) took every task slot in 20,000 tasks, and another
    session's SELECT 1 waited 4.7 s for the driver's scheduler (bench.sql_attacks)."""
    _refused(
        attacks,
        "partitions_range",
        "partitions_hint",
        "partitions_dataframe",
        saying="at most 8 partitions (sql.max_partitions), not 20000",
    )
    allowed = attacks["partitions_allowed"]
    assert allowed["error"] is None and allowed["value"] == 1000, allowed


def test_jdbc_is_refused_before_any_connection(attacks, targets):
    """Finding 5: a Derby database was created before the read was refused; a JDBC catalog
    was added by SET."""
    _refused(attacks, "jdbc_read", saying="data sources cannot be read")
    _refused(attacks, "jdbc_temp_view", saying="read-only")
    _refused(attacks, "jdbc_catalog", "jdbc_catalog_conf", saying="cannot be set")
    _refused(attacks, "show_namespaces_x", saying="only the catalog's views can be named")
    for database in ("derby", "derby_view", "derby_catalog"):
        assert not Path(targets[database]).exists(), f"{database} was created"


def test_describe_and_show_reach_only_the_views(attacks, serving_settings):
    """Finding 6: DESCRIBE HISTORY showed forget predicates, DESCRIBE DETAIL told which paths
    exist, DESCRIBE showed hidden columns, SHOW CREATE TABLE showed lake paths."""
    _refused(
        attacks,
        "describe_history",
        "describe_history_string",
        "describe_detail",
        "describe_detail_missing",
        "describe_path",
        "describe_extended",
        "show_create_table",
        "explain_path",
        "table_exists_path",
        "input_files",
    )
    # The same answer whether a table is at the path or not: nothing to probe with.
    assert attacks["describe_detail"]["error"] == attacks["describe_detail_missing"]["error"]
    assert serving_settings.lake.root not in json.dumps(attacks)
    columns = attacks["describe_events"]["value"]
    assert "anonymousId" in columns and "userId" not in columns


def test_caching_is_refused(attacks):
    """Finding 7: persist, cacheTable and clearCache worked, on a cache every session shares."""
    _refused(attacks, "persist", "cache_table", "clear_cache", "cache_sql", saying="caching")
    assert attacks["is_cached"]["error"] is None and attacks["is_cached"]["value"] is False
    assert attacks["count_events"]["value"] > 0


def test_no_function_reads_a_file_or_fetches_a_url(attacks, listener):
    """Finding 1 of the second round: from_xml's XSD option read /etc/passwd, told missing
    files from directories and fetched URLs; from_protobuf read descriptors (and /dev/zero
    until the heap was gone); input_file_name() and table_changes_by_path showed the lake."""
    files = ("xsd_file", "xsd_missing", "xsd_url", "protobuf_file", "protobuf_zero", "avro_url")
    _refused(attacks, *files, "schema_of_xml", saying="is not available to analysts")
    _refused(attacks, "input_file_name", "table_changes", saying="is not available to analysts")
    _refused(attacks, "df_from_xml", "df_input_file_name", "df_reflect", saying="not available")
    # The same answer whatever the path names: nothing to probe with.
    assert attacks["xsd_file"]["error"] == attacks["xsd_missing"]["error"]
    assert attacks["xsd_file"]["error"] == attacks["xsd_url"]["error"]
    assert listener[1] == [], f"the SQL server fetched the attacker's URL: {listener[1]}"
    metadata = attacks["metadata_column"]["error"]
    assert metadata and "file_path" not in str(attacks["metadata_column"]["value"]), metadata


def test_no_statement_can_hold_the_drivers_memory(attacks):
    """Finding 3 of the second round: length(repeat('x', 900000000)) ran the 1 GB driver out of
    heap (constant folding), every session was lost and the server restarted."""
    _refused(
        attacks,
        "repeat_900m",
        "values_900m",
        "sequence_1g",
        "array_repeat_1g",
        "lpad_900m",
        "growth_by_cte",
        "subquery_900m",
        "df_repeat_900m",
        saying="sql.max_value_bytes",
    )
    for name in ("repeat_900m", "values_900m", "growth_by_cte"):
        assert attacks[name]["seconds"] < ANSWERS_WITHIN_S, attacks[name]
    assert attacks["allowed_functions"]["value"] == {
        "r": "ababab",
        "p": "007",
        "n": 5,
        "host": "a.b",
    }


def test_a_pattern_that_backtracks_for_hours_is_refused(attacks):
    """Finding 4 of the second round: (.*a){12}$ kept both cores busy past its cancellation."""
    _refused(attacks, "regex_backtracking", saying="exponential time")
    assert attacks["regex_backtracking"]["seconds"] < ANSWERS_WITHIN_S


def test_plans_and_errors_show_no_internals(attacks, serving_settings):
    """Finding 8 of the second round: errors carried the analysed plan (paths, hidden columns);
    EXPLAIN EXTENDED and COST showed the views' bodies."""
    _refused(
        attacks,
        "explain_extended",
        "explain_cost",
        "explain_formatted",
        "df_explain_extended",
        "list_functions",
    )
    plan = attacks["explain"]["value"]
    assert "View spark_catalog.default.events" in plan or "View default.events" in plan, plan
    for internal in (serving_settings.lake.root, "userId", "Relation", "FileScan", "parquet"):
        assert internal not in plan, f"EXPLAIN shows {internal}:\n{plan}"
    error = attacks["error_text"]["value"]
    assert error and "no_such_column" in error, error
    for internal in (serving_settings.lake.root, "Relation", "+- ", "userId"):
        assert internal not in error, f"the error shows {internal}:\n{error}"
    assert "from_json" in attacks["show_functions_from"]["value"]
    assert "from_xml" not in attacks["show_functions_from"]["value"]


def test_show_functions_is_the_list_and_every_listed_example_runs(
    sql_server, client_python, tmp_path
):
    """One list for the parser, the protocol and the plans: SHOW FUNCTIONS shows it, and every
    example of every listed function (DESCRIBE FUNCTION EXTENDED) passes all three."""
    from serving.connect.guard import analyst_functions

    listed = [name for group in analyst_functions().values() for name in group]
    names = sorted({name.removeprefix("tvf:") for name in listed})
    scalar = [name for name in listed if not name.startswith("tvf:")]
    answer = run_attacker(client_python, sql_server.settings, tmp_path, "functions", names=scalar)
    assert answer["shown"] == names
    assert answer["examples"] > 500, answer["examples"]
    assert answer["refused"] == {}, answer["refused"]
    # Names DataFrames call and the parser reads as syntax, not functions Spark can describe.
    assert set(answer["undescribed"]) <= {"product", "timestampadd", "timestampdiff"}


# --- SQL over HTTP -----------------------------------------------------------------------------


def test_post_sql_refuses_deep_nesting_with_a_clear_400(api, sql_server, caplog):
    """Finding 8: 200-deep nesting was a 500 with sqlglot's RecursionError in the log."""
    caplog.set_level(logging.INFO)
    began = time.monotonic()
    answer = api.post("/v1/sql", json={"sql": "SELECT " + "(" * 200 + "1" + ")" * 200})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "statement_too_deep"
    assert time.monotonic() - began < 5
    logged = caplog.text + "".join(str(r.exc_info) for r in caplog.records)
    assert "RecursionError" not in logged and "Traceback" not in logged


def test_post_sql_decides_on_the_same_functions(api, sql_server, listener):
    """The functions' list holds over HTTP as over Spark Connect."""
    xml = api.post(
        "/v1/sql",
        json={
            "sql": f"SELECT from_xml('<r/>', 'a INT', map('rowValidationXSDPath', '{listener[0]}'))"
        },
    )
    assert xml.status_code == 400 and "from_xml is not available" in xml.json()["message"], xml.text
    big = api.post("/v1/sql", json={"sql": "SELECT length(repeat('x', 900000000)) AS n"})
    assert big.status_code == 400 and "sql.max_value_bytes" in big.json()["message"], big.text
    assert listener[1] == []


def test_post_sql_shows_no_path_and_no_history(api, sql_server, targets, serving_settings):
    """Findings 6 and 8 over HTTP: DESCRIBE HISTORY on silver, SHOW CREATE TABLE."""
    history = api.post("/v1/sql", json={"sql": f"DESCRIBE HISTORY delta.`{targets['silver']}`"})
    assert history.status_code == 400 and REFUSED in history.json()["message"], history.text
    create = api.post("/v1/sql", json={"sql": "SHOW CREATE TABLE events"})
    assert create.status_code == 400 and create.json()["error"] == "read_only"
    for answer in (history, create):
        assert serving_settings.lake.root not in answer.text
    columns = api.post("/v1/sql", json={"sql": "DESCRIBE events"})
    assert columns.status_code == 200, columns.text


# --- health and restart (the time limit, fairness, a client that left: test_sql_limits.py) --


def test_health_runs_a_real_query_and_metrics_count_the_refusals(sql_server, attacks):
    health = sql_server.health()
    assert health["status"] == "ok" and health["answering"] is True, health
    assert health["health_query_s"] < ANSWERS_WITHIN_S
    metrics = sql_metrics(sql_server)
    assert metrics[("wap_sql_answering",)] == 1
    for reason in ("rpc", "data_source", "setting", "statement_depth", "metadata", "cache"):
        assert metrics.get(("wap_sql_refusals_total", ("reason", reason)), 0) > 0, reason
    assert metrics[("wap_sql_statements_total", ("outcome", "refused"))] > 0
    assert metrics[("wap_sql_statements_total", ("outcome", "succeeded"))] > 0
    assert metrics[("wap_sql_jobs_total", ("pool", "analysts"))] > 0
    assert metrics[("wap_sql_active_sessions",)] >= 1
    assert (
        0
        < metrics[("wap_sql_driver_memory_used_bytes",)]
        <= metrics[("wap_sql_driver_memory_max_bytes",)]
    )
    assert metrics[("wap_sql_statement_duration_seconds_count",)] > 0


def test_a_server_that_stops_answering_is_restarted(sql_server, client_python, tmp_path):
    """Finding 3: after the out-of-memory error every query hung until a restart nobody
    triggered. A driver that stops (SIGSTOP: it holds its port and answers nothing) is
    found by /health's SELECT 1 and restarted by the supervisor."""
    (server,) = children(sql_server.process.pid)
    drivers = java_children(server)
    assert len(drivers) == 1, drivers
    os.kill(drivers[0], signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        deadline = stopped + 600
        while time.monotonic() < deadline:
            if sql_server.answering_after(server):
                break
            time.sleep(2)
        else:
            pytest.fail(f"not restarted:\n{sql_server.log.read_text()[-5000:]}")
    finally:
        if alive(drivers[0]):
            os.kill(drivers[0], signal.SIGKILL)
    assert not alive(server) and not alive(drivers[0]), "the stopped server was left running"
    assert sql_server.health()["uptime_s"] < time.monotonic() - stopped
    answer = run_attacker(client_python, sql_server.settings, tmp_path, "select1")
    assert answer["error"] is None and answer["seconds"] < ANSWERS_WITHIN_S, answer
    assert "sql.supervisor.restarting" in sql_server.log.read_text()
