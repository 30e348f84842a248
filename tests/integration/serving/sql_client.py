"""An analyst's script: run by the SQL tests in the analyst's virtualenv (``pyspark-client``).

It imports nothing from this repository. Reads a JSON job (argv[1]): the
Spark Connect URL, the named queries and their parameters; prints one JSON
document: the views it lists, each query's rows, the columns of ``events``,
and what the server answered to things an analyst may not do.
"""

import datetime
import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import udf


def plain(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return None
    return value


def refused(action):
    try:
        action()
    except Exception as error:  # any refusal is reported, its message checked
        return str(error).splitlines()[0]
    return None


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        job = json.load(file)
    spark = SparkSession.builder.remote(job["url"]).getOrCreate()
    out = {"views": sorted(r.viewName for r in spark.sql("SHOW VIEWS").collect())}
    out["rows"] = {
        name: [[plain(v) for v in row] for row in spark.sql(sql, args=job["params"]).collect()]
        for name, sql in job["queries"].items()
    }
    events = spark.table("events")
    out["events_columns"] = events.columns
    out["context_fields"] = events.schema["context"].dataType.fieldNames()
    out["refused"] = {
        "write_lake": refused(lambda: spark.range(3).write.mode("append").parquet(job["lake"])),
        "read_silver_path": refused(lambda: spark.read.format("delta").load(job["silver"]).count()),
        "sql_path": refused(lambda: spark.sql("SELECT * FROM text.`/etc/passwd`").collect()),
        "drop_view": refused(lambda: spark.sql("DROP VIEW events").collect()),
        "python_udf": refused(lambda: spark.range(2).select(udf(lambda x: x)("id")).collect()),
        "user_id": refused(lambda: spark.sql("SELECT userId FROM events").collect()),
    }
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
