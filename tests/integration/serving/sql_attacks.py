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
- ``functions``: ``SHOW FUNCTIONS``, and each example of ``DESCRIBE FUNCTION EXTENDED`` of
  every function the job names, run: the names shown, the examples the server refused and
  the names it could not describe.
- ``long``: prints ``running`` and runs the long statement (the test kills it).
"""

import json
import re
import sys
import threading
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

LONG = "SELECT max(sha2(CAST(id AS STRING), 256)) AS m FROM range(0, 4000000000, 1, 8)"
"""Most of an hour of work for two cores, in the most partitions a statement may ask for (8,
one fewer than the server's task slots): it holds 8 slots until the time limit ends it, and a
fair scheduler gives another session's job the ninth at once, a FIFO one only after the last
task."""
LONG_SUBQUERY = f"SELECT ({LONG}) AS m"
"""``LONG`` as a scalar subquery: cancelled at the time limit, its error is a wrapper of the
cancellation (``Exception thrown in awaitResult``) the analyst must still read as the limit."""


def nested(depth):
    return "SELECT " + "(" * depth + "1" + ")" * depth


def xsd(path):
    """from_xml with an XSD option: Spark opens ``path`` (a file or a URL) while it resolves it."""
    return f"SELECT from_xml('<r><a>1</a></r>', 'a INT', map('rowValidationXSDPath', '{path}'))"


def full_error(run):
    """The whole message of the error ``run`` raises (not only its first line)."""
    try:
        run()
    except Exception as error:  # the message is the value under test
        return str(error)
    return None


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
    # Every task slot and the driver's scheduler taken: 20,000 partitions asked for.
    "partitions_range": lambda s, j: s.sql(
        "SELECT max(sha2(CAST(id AS STRING), 256)) FROM range(0, 4000000000, 1, 20000)"
    ).collect(),
    "partitions_hint": lambda s, j: s.sql(
        "SELECT /*+ REPARTITION(20000) */ count(*) FROM events"
    ).collect(),
    "partitions_dataframe": lambda s, j: s.range(0, 1000).repartition(20_000).count(),
    "partitions_allowed": lambda s, j: s.range(0, 1000, 1, 8).repartition(8).count(),
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
    # 8. Functions that read files and fetch URLs while Spark resolves them; storage shown.
    "xsd_file": lambda s, j: s.sql(xsd("/etc/passwd")).collect(),
    "xsd_missing": lambda s, j: s.sql(xsd(j["missing"])).collect(),
    "xsd_url": lambda s, j: s.sql(xsd(j["url_inside"])).collect(),
    "protobuf_file": lambda s, j: s.sql(
        "SELECT from_protobuf(X'00', 'M', '/etc/passwd')"
    ).collect(),
    "protobuf_zero": lambda s, j: s.sql("SELECT from_protobuf(X'00', 'M', '/dev/zero')").collect(),
    "avro_url": lambda s, j: s.sql(
        "SELECT from_avro(X'00', '{}', map('avroSchemaUrl', 'file:///etc/passwd'))"
    ).collect(),
    "schema_of_xml": lambda s, j: s.sql("SELECT schema_of_xml('<r/>', map())").collect(),
    "input_file_name": lambda s, j: s.sql("SELECT input_file_name() FROM events").collect(),
    "metadata_column": lambda s, j: s.sql("SELECT _metadata.file_path FROM events").collect(),
    "table_changes": lambda s, j: s.sql(
        f"SELECT * FROM table_changes_by_path('{j['silver']}', 0)"
    ).collect(),
    "df_from_xml": lambda s, j: s.range(1).select(F.expr(xsd("/etc/passwd")[7:])).collect(),
    "df_input_file_name": lambda s, j: s.table("events").select(F.input_file_name()).collect(),
    "df_reflect": lambda s, j: s.range(1)
    .select(F.call_function("reflect", F.lit("java.lang.System"), F.lit("exit"), F.lit(1)))
    .collect(),
    # 9. One statement that ran the driver out of memory (constants folded on the driver).
    "repeat_900m": lambda s, j: s.sql(
        "SELECT length(repeat('x', 900000000)) AS n FROM range(1)"
    ).collect(),
    "values_900m": lambda s, j: s.sql(
        "SELECT length(x) FROM VALUES (repeat('x', 900000000)) t(x)"
    ).collect(),
    "sequence_1g": lambda s, j: s.sql("SELECT size(sequence(1, 1000000000))").collect(),
    "array_repeat_1g": lambda s, j: s.sql("SELECT size(array_repeat(1, 1000000000))").collect(),
    "lpad_900m": lambda s, j: s.sql("SELECT length(lpad('x', 900000000, 'y'))").collect(),
    "growth_by_cte": lambda s, j: s.sql(
        "WITH a AS (SELECT repeat('x', 1000000) s FROM VALUES (1) t(i)), "
        "b AS (SELECT concat(s, s, s, s, s, s, s, s, s, s) s FROM a), "
        "c AS (SELECT concat(s, s, s, s, s, s, s, s, s, s) s FROM b) SELECT length(s) FROM c"
    ).collect(),
    "subquery_900m": lambda s, j: s.sql(
        "SELECT length((SELECT repeat('x', 900000000))) AS n"
    ).collect(),
    "df_repeat_900m": lambda s, j: s.range(1).select(F.repeat(F.lit("x"), 900000000)).collect(),
    # 10. A pattern that backtracks for hours, past its cancellation.
    "regex_backtracking": lambda s, j: s.sql(
        "SELECT count(*) FROM range(0, 2, 1, 2) WHERE "
        "regexp_like(concat(repeat('a', 36), CAST(id AS STRING), '!'), '(.*a){12}$')"
    ).collect(),
    # 11. Plans that show the views' bodies, the lake's paths and hidden columns.
    "explain_extended": lambda s, j: s.sql("EXPLAIN EXTENDED SELECT * FROM events").collect(),
    "explain_cost": lambda s, j: s.sql("EXPLAIN COST SELECT * FROM events").collect(),
    "explain_formatted": lambda s, j: s.sql("EXPLAIN FORMATTED SELECT * FROM events").collect(),
    "df_explain_extended": lambda s, j: s.table("events")._explain_string(extended=True),
    "list_functions": lambda s, j: [f.name for f in s.catalog.listFunctions()],
    # What stays allowed.
    "explain": lambda s, j: s.sql("EXPLAIN SELECT count(*) FROM events").collect()[0][0],
    "error_text": lambda s, j: full_error(
        lambda: s.sql("SELECT no_such_column FROM events").collect()
    ),
    "show_functions_from": lambda s, j: [
        r[0] for r in s.sql("SHOW FUNCTIONS LIKE 'from*'").collect()
    ],
    "allowed_functions": lambda s, j: s.sql(
        "SELECT repeat('ab', 3) AS r, lpad('7', 3, '0') AS p, size(sequence(1, 5)) AS n, "
        "regexp_extract('https://a.b/c', '^https?://([^/]+)/', 1) AS host"
    )
    .collect()[0]
    .asDict(),
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


def functions(spark, job):
    """SHOW FUNCTIONS, then every example of each named function's DESCRIBE FUNCTION EXTENDED."""
    shown = sorted(r[0] for r in spark.sql("SHOW FUNCTIONS").collect())
    refused, undescribed, ran = {}, [], 0
    for name in job["names"]:
        try:
            rows = spark.sql(f"DESCRIBE FUNCTION EXTENDED `{name}`").collect()
        except Exception as error:  # a name only DataFrames call (product), or refused
            if "Refused by the SQL server" in str(error):
                refused[f"DESCRIBE FUNCTION {name}"] = first_line(error)
            undescribed.append(name)
            continue
        text = "\n".join(r[0] for r in rows)
        for example in re.findall(r">\s*(SELECT .*?);", text, re.S):
            ran += 1
            try:
                spark.sql(example).collect()
            except Exception as error:  # only the server's refusals count
                if "Refused by the SQL server" in str(error):
                    refused[example] = first_line(error)
    return {"shown": shown, "refused": refused, "undescribed": undescribed, "examples": ran}


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
    elif mode == "functions":
        out = functions(spark, job)
    elif mode == "select1":
        out = timed(lambda: spark.sql("SELECT 1").collect())
    elif mode == "time_limit":
        out = timed(lambda: spark.sql(LONG).collect())
    elif mode == "fair":
        other = SparkSession.builder.remote(job["url"]).create()
        other.sql("SELECT 1").collect()
        heavy = {}
        thread = threading.Thread(
            target=lambda: heavy.update(timed(lambda: spark.sql(LONG_SUBQUERY).collect()))
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
