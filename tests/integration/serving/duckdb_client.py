"""An analyst's script reading the lake with DuckDB: run by the DuckDB tests in the analyst's
virtualenv.

It imports nothing from this repository. Reads a JSON job (argv[1]): the docs' DuckDB setup
(its lake paths set to the test's lake), the docs' named DuckDB queries and their parameters;
prints one JSON document: each query's rows, every row of each gold view, the columns of each
view, and where the Delta extension was loaded from.
"""

import datetime
import hashlib
import json
import sys

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def plain(value):
    """A JSON value Spark's side can be compared with: times in microseconds since the epoch,
    dates in ISO 8601, binary values (sketches) by their SHA-256."""
    if isinstance(value, datetime.datetime):
        return (value - EPOCH) // datetime.timedelta(microseconds=1)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(value).hexdigest()
    return value


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as file:
        job = json.load(file)
    scope = {}
    exec(job["setup"], scope)  # the docs' own Python: opens `con` with the Delta extension
    con = scope["con"]
    out = {"rows": {}, "tables": {}, "columns": {}}
    for name, sql in job["queries"].items():
        out["rows"][name] = [
            [plain(v) for v in row] for row in con.execute(sql, job["params"]).fetchall()
        ]
    listed = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    views = [row[0] for row in listed]
    for view in sorted(views):
        out["columns"][view] = [row[0] for row in con.execute(f"DESCRIBE {view}").fetchall()]
        if view.startswith("gold_"):
            result = con.execute(f"SELECT * FROM {view}")
            names = [d[0] for d in result.description]
            out["tables"][view] = [
                {n: plain(v) for n, v in zip(names, row, strict=True)} for row in result.fetchall()
            ]
    out["extension"] = con.execute(
        "SELECT install_path FROM duckdb_extensions() WHERE extension_name = 'delta' AND loaded"
    ).fetchall()
    out["autoinstall"] = con.execute(
        "SELECT current_setting('autoinstall_known_extensions')"
    ).fetchone()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
