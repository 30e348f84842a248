"""An analyst's membership test against the views' sketches: run by the sketch privacy test in
the analyst's virtualenv (``pyspark-client`` from PyPI, nothing of this repository).

It imports nothing from this repository. Reads a JSON job (argv[1]): the Spark
Connect URL and ``probes``, each ``{"table", "measure", "keys", "candidates"}``
where ``candidates`` is ``{"prefix", "width", "count"}`` (the ids
``prefix + zero-padded n`` for n below ``count``, made in SQL: ``buyer-0000`` ...)
or ``{"ids": [...]}``. For every candidate and every row of the table, a
sketch of the candidate alone (``hll_sketch_agg``) is unioned with the row's
sketch (``hll_union``): an estimate that does not move says the candidate is
in the row. Prints one JSON document (its last line): per probe, ``rows``
(the table's rows with a sketch) and ``found``, ``[window_start, *keys,
candidate]`` of each such match.
"""

import json
import sys

from pyspark.sql import SparkSession

CHUNK = 100
"""Candidates per statement: each statement stays well inside the server's time limit."""


def candidates_sql(candidates, start):
    """A relation of one column ``candidate``: ``CHUNK`` candidates from ``start``."""
    if "ids" in candidates:
        ids = candidates["ids"][start : start + CHUNK]
        quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in ids)
        return f"SELECT explode(array({quoted})) AS candidate"
    end = min(start + CHUNK, candidates["count"])
    return (
        f"SELECT concat('{candidates['prefix']}', lpad(CAST(id AS STRING), "
        f"{candidates['width']}, '0')) AS candidate FROM range({start}, {end})"
    )


def members(spark, probe):
    """``[window_start, *keys, candidate]`` of every unmoved union of ``probe``."""
    table, sketch = probe["table"], probe["measure"]
    keys = "".join(f", {k}" for k in probe["keys"])
    candidates = probe["candidates"]
    total = len(candidates["ids"]) if "ids" in candidates else candidates["count"]
    found = []
    for start in range(0, total, CHUNK):
        statement = (
            "WITH probes AS (SELECT candidate, hll_sketch_agg(candidate) AS probe FROM ("
            f"{candidates_sql(candidates, start)}) GROUP BY candidate), "
            f"windows AS (SELECT CAST(window_start AS STRING) AS w{keys}, {sketch} AS s, "
            f"hll_sketch_estimate(hll_union({sketch}, {sketch}, true)) AS alone "
            f"FROM {table} WHERE {sketch} IS NOT NULL) "
            f"SELECT w{keys}, candidate FROM windows CROSS JOIN probes "
            "WHERE hll_sketch_estimate(hll_union(s, probe, true)) = alone"
        )
        found += [list(row) for row in spark.sql(statement).collect()]
    rows = spark.sql(f"SELECT count(*) FROM {table} WHERE {sketch} IS NOT NULL").collect()
    return {"rows": rows[0][0], "found": found}


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        job = json.load(file)
    spark = SparkSession.builder.remote(job["url"]).create()
    spark.sql("SET spark.sql.session.timeZone=UTC").collect()
    out = [members(spark, probe) for probe in job["probes"]]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
