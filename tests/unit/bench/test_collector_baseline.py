"""The collector benchmark's baseline: an earlier commit's files, and the settings it reads."""

from __future__ import annotations

import subprocess

from bench.collector_throughput import REPO, baseline_env, baseline_tree
from core.settings import CollectorSettings, KafkaSettings, load_settings


def test_the_baseline_gets_each_field_it_needs_alone_with_its_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("WAP_SPEED__PIPELINES", '["web_events"]')  # this process's: not passed
    settings = load_settings().model_copy(
        update={
            "kafka": KafkaSettings(events_topic="bench.events.x", dlq_topic="bench.dlq.x"),
            "collector": CollectorSettings(
                port=18188,
                write_keys={"bench": "bench-write-key-0001"},
                ip_anonymisation="hash",
                hash_key="h" * 32,
            ),
        }
    )
    env = baseline_env(settings)
    wap = {k: v for k, v in env.items() if k.startswith("WAP_")}
    assert wap == {
        "WAP_KAFKA__BOOTSTRAP_SERVERS": settings.kafka.bootstrap_servers,
        "WAP_KAFKA__EVENTS_TOPIC": "bench.events.x",
        "WAP_KAFKA__DLQ_TOPIC": "bench.dlq.x",
        "WAP_COLLECTOR__PORT": "18188",
        "WAP_COLLECTOR__WRITE_KEYS": '{"bench": "bench-write-key-0001"}',
        "WAP_COLLECTOR__IP_ANONYMISATION": "hash",
        "WAP_COLLECTOR__HASH_KEY": "h" * 32,
        "WAP_LOCAL__STATE_DIR": str(settings.local.state_dir),
    }


def test_the_baseline_tree_holds_the_commit_s_files(tmp_path):
    tree, sha = baseline_tree(tmp_path, "HEAD")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert sha == head
    assert tree == tmp_path / "bench" / f"baseline-{head[:12]}"
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD", "ingest/"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert listed and all((tree / name).is_file() for name in listed)
    assert baseline_tree(tmp_path, "HEAD") == (tree, sha)  # made once, found again
