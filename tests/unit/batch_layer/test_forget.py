"""What ``forget`` reports: the erasure per table from Delta's metrics, and the run as JSON."""

from __future__ import annotations

import json
from datetime import date

from batch_layer.forget import ForgetRun, TableErasure, erasure_of
from batch_layer.maintenance import vacuum_hours
from core.settings import BatchSettings, Settings


def test_rows_come_from_the_delete_and_files_from_every_commit():
    # What Delta 4.4 records: a DELETE with deletion vectors rewrites no file; REORG's
    # PURGE does, and auto-compaction may follow it.
    commits = [
        ("DELETE", {"numDeletedRows": "12", "numRemovedFiles": "0", "numAddedFiles": "0"}),
        ("REORG", {"numRemovedFiles": "3", "numAddedFiles": "1", "numDeletionVectorsRemoved": "3"}),
        ("OPTIMIZE", {"numRemovedFiles": "2", "numAddedFiles": "1"}),
    ]
    assert erasure_of(commits) == TableErasure(12, 5, 2, ("DELETE", "REORG", "OPTIMIZE"))


def test_a_table_without_commits_or_metrics_reports_zeros():
    assert erasure_of([]) == TableErasure()
    assert erasure_of([("REORG", None)]) == TableErasure(0, 0, 0, ("REORG",))


def test_the_report_is_json_totals_rows_and_names_no_user():
    run = ForgetRun(
        subject="sha256:0123456789abcdef",
        request_id="manual__2026-11-23T14:00:00",
        days=(date(2024, 3, 1), date(2024, 3, 2)),
        tables={
            "bronze": TableErasure(14, 2, 2, ("DELETE", "REORG")),
            "rejects": TableErasure(1, 1, 1, ("DELETE", "REORG")),
            "silver": TableErasure(12, 2, 2, ("DELETE", "REORG")),
        },
        seconds=41.237,
    )
    report = json.loads(json.dumps(run.report()))
    assert report == {
        "subject": "sha256:0123456789abcdef",
        "request_id": "manual__2026-11-23T14:00:00",
        "days": ["2024-03-01", "2024-03-02"],
        "rows_deleted": 27,
        "tables": {
            name: {
                "rows_deleted": t.rows_deleted,
                "files_removed": t.files_removed,
                "files_added": t.files_added,
                "operations": ["DELETE", "REORG"],
            }
            for name, t in run.tables.items()
        },
        "seconds": 41.24,
    }


def test_vacuum_keeps_erased_files_no_longer_than_the_erasure_retention():
    assert vacuum_hours(Settings()) == 168
    assert vacuum_hours(Settings(batch=BatchSettings(erasure_retention_hours=24))) == 24
    longer = BatchSettings(vacuum_retention_hours=48, erasure_retention_hours=168)
    assert vacuum_hours(Settings(batch=longer)) == 48
