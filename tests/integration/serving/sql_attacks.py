"""A hostile analyst's script: run by the SQL security tests in the analyst's virtualenv
(``pyspark-client`` and the analyst's other tools from PyPI, nothing of this repository).

It imports nothing from this repository. Reads a JSON job (argv[1]): the
Spark Connect URL, a ``mode`` and the paths the attacks aim at; prints one
JSON document (its last line of output).

- ``attacks``: every attack of :data:`ATTACKS`, each followed by ``SELECT 1``
  from a second session; per attack: ``error`` (the first line of what the
  server answered, null when it did what was asked), ``value``, ``seconds``
  and ``select1_s``.
- ``time_limit``: one statement that runs for hours: its error and duration.
- ``fair``: the same statement in one session and, five seconds into it, a
  small job in another: how long each took.
- ``select1``: ``SELECT 1`` from a new session: its error and duration.
- ``long``: prints ``running`` and runs the long statement (the test kills it).
"""

import json
import sys
import threading
import time

from pyspark.sql import SparkSession

LONG = "SELECT max(sha2(CAST(id AS STRING), 256)) AS m FROM range(0, 4000000000, 1, 20000)"
"""Most of an hour of work for two cores, in 20,000 tasks of a fraction of a second: a core
frees often, so a fair scheduler gives another session's job one at once, and a FIFO one
only after the last task (tasks of seconds each, slower still on a busy machine, made the
two look alike)."""


def nested(depth):
    return "SELECT " + "(" * depth + "1" + ")" * depth


ATTACKS = {
    # 1. Code of the client run in the server: a jar, then its data source class.
    "add_jar": lambda s, j: s.addArtifacts(j["jar"]),
    "load_provider": lambda s, j: s.read.format(j["provider"]).load().count(),
    # 2. Files written where the analyst names, after a SET opens the way.
    "sql_set_copy_local": lambda s, j: s.sql(
        "SET spark.sql.artifact.copyFromLocalToFs.allowDestLocal=true"
    ).collect(),
    "conf_set_copy_local": lambda s, j: s.conf.set(
        "spark.sql.artifact.copyFromLocalToFs.allowDestLocal", "true"
    ),
    "copy_to_fs": lambda s, j: s.copyFromLocalToFs(j["copy_source"], j["copy_destination"]),
    "set_cte_limit": lambda s, j: s.sql("SET spark.sql.cteRecursionLevelLimit=-1").collect(),
    "conf_set_row_limit": lambda s, j: s.conf.set("spark.sql.cteRecursionRowLimit", "-1"),
    "read_token": lambda s, j: s.conf.get("spark.connect.authenticate.token"),
    "read_warehouse": lambda s, j: s.sql("SET spark.sql.warehouse.dir").collect(),
    # 3. One statement that took the driver's memory for minutes.
    "nested_20000": lambda s, j: s.sql(nested(20_000)).collect(),
    "nested_operators": lambda s, j: s.sql("SELECT " + "NOT " * 20_000 + "true").collect(),
    # 5. JDBC: a connection opened (a database created) before any check.
    "jdbc_read": lambda s, j: s.read.format("jdbc")
    .option("url", f"jdbc:derby:{j['derby']};create=true")
    .option("dbtable", "x")
    .load()
    .count(),
    "jdbc_temp_view": lambda s, j: s.sql(
        f"CREATE TEMP VIEW j USING jdbc OPTIONS (url 'jdbc:derby:{j['derby_view']};create=true', "
        "dbtable 'x')"
    ).collect(),
    "jdbc_catalog": lambda s, j: s.sql(
        "SET spark.sql.catalog.x="
        "org.apache.spark.sql.execution.datasources.v2.jdbc.JDBCTableCatalog"
    ).collect(),
    "jdbc_catalog_conf": lambda s, j: s.conf.set(
        "spark.sql.catalog.x.url", f"jdbc:derby:{j['derby_catalog']};create=true"
    ),
    "show_namespaces_x": lambda s, j: s.sql("SHOW NAMESPACES IN x").collect(),
    # 6. DESCRIBE and SHOW on any path: history with forget predicates, which paths exist,
    # hidden columns, lake paths.
    "describe_history": lambda s, j: s.sql(f"DESCRIBE HISTORY delta.`{j['silver']}`").collect(),
    "describe_history_string": lambda s, j: s.sql(f"DESCRIBE HISTORY '{j['silver']}'").collect(),
    "describe_detail": lambda s, j: s.sql(f"DESCRIBE DETAIL delta.`{j['silver']}`").collect(),
    "describe_detail_missing": lambda s, j: s.sql(
        f"DESCRIBE DETAIL delta.`{j['missing']}`"
    ).collect(),
    "describe_path": lambda s, j: s.sql(f"DESCRIBE delta.`{j['silver']}`").collect(),
    "describe_extended": lambda s, j: s.sql("DESCRIBE EXTENDED events").collect(),
    "show_create_table": lambda s, j: s.sql("SHOW CREATE TABLE events").collect(),
    "explain_path": lambda s, j: s.sql(f"EXPLAIN SELECT * FROM delta.`{j['silver']}`").collect(),
    "table_exists_path": lambda s, j: s.catalog.tableExists(f"delta.`{j['silver']}`"),
    "input_files": lambda s, j: s.table("events").inputFiles(),
    # 7. Caching, shared by every session.
    "persist": lambda s, j: s.table("events").persist().count(),
    "cache_table": lambda s, j: s.catalog.cacheTable("events"),
    "clear_cache": lambda s, j: s.catalog.clearCache(),
    "cache_sql": lambda s, j: s.sql("CACHE TABLE events").collect(),
    # What stays allowed.
    "is_cached": lambda s, j: s.catalog.isCached("events"),
    "describe_events": lambda s, j: [r.col_name for r in s.sql("DESCRIBE events").collect()],
    "set_time_zone": lambda s, j: s.sql("SET spark.sql.session.timeZone=UTC").collect()[0][1],
    "count_events": lambda s, j: s.table("events").count(),
}


def first_line(error):
    """What the server answered: a gRPC error's details, else the exception's first line."""
    details = getattr(error, "details", None)
    text = details() if callable(details) else str(error)
    return (str(text).strip().splitlines() or [""])[0]


def plain(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def attack(spark, other, job):
    out = {}
    for name, run in ATTACKS.items():
        began = time.monotonic()
        try:
            value, error = plain(run(spark, job)), None
        except Exception as refused:  # every refusal is reported, its message checked
            value, error = None, first_line(refused)
        seconds = time.monotonic() - began
        began = time.monotonic()
        other.sql("SELECT 1").collect()
        out[name] = {
            "error": error,
            "value": value,
            "seconds": seconds,
            "select1_s": time.monotonic() - began,
        }
    return out


def timed(run):
    began = time.monotonic()
    try:
        run()
        error = None
    except Exception as failed:
        error = first_line(failed)
    return {"error": error, "seconds": time.monotonic() - began}


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        job = json.load(file)
    spark = SparkSession.builder.remote(job["url"]).create()
    mode = job["mode"]
    if mode == "attacks":
        out = attack(spark, SparkSession.builder.remote(job["url"]).create(), job)
    elif mode == "select1":
        out = timed(lambda: spark.sql("SELECT 1").collect())
    elif mode == "time_limit":
        out = timed(lambda: spark.sql(LONG).collect())
    elif mode == "fair":
        other = SparkSession.builder.remote(job["url"]).create()
        other.sql("SELECT 1").collect()
        heavy = {}
        thread = threading.Thread(
            target=lambda: heavy.update(timed(lambda: spark.sql(LONG).collect()))
        )
        thread.start()
        time.sleep(5)
        out = {"small": timed(lambda: other.range(0, 1_000_000, 1, 4).count())}
        thread.join()
        out["heavy"] = heavy
    else:
        print("running", flush=True)
        spark.sql(LONG).collect()
        out = {}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
