from __future__ import annotations

import json

from ingest.simulator import GroundTruth, SimulatorConfig, build_truth, generate
from ingest.simulator.__main__ import main


def test_generate_only_writes_truth_and_dump(tmp_path, capsys):
    truth_path, dump_path = tmp_path / "truth.json", tmp_path / "events.jsonl"
    argv = ["--events", "300", "--seed", "3", "--invalid-rate", "0.1", "--duplicate-rate", "0.1"]
    assert main([*argv, "--truth", str(truth_path), "--dump", str(dump_path)]) == 0
    expected = generate(SimulatorConfig(seed=3, events=300, invalid_rate=0.1, duplicate_rate=0.1))
    assert GroundTruth.from_json(truth_path.read_text()) == build_truth(expected)
    lines = dump_path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [e.payload for e in expected]
    summary = json.loads(capsys.readouterr().out)
    assert summary["generated"] == len(expected)


def test_send_through_the_cli(collector, tmp_path, capsys):
    truth_path = tmp_path / "truth.json"
    argv = ["--url", collector.url, "--write-key", "k", "--events", "200", "--rate", "100000"]
    assert main([*argv, "--no-progress", "--truth", str(truth_path)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["sent"], summary["accepted"], summary["requests"]) == (200, 200, 2)
    assert sum(len(r.body["batch"]) for r in collector.requests) == 200
    assert GroundTruth.from_json(truth_path.read_text()).valid_events == 200


def test_bad_knob_is_a_usage_error(capsys):
    try:
        main(["--duplicate-rate", "1.5"])
    except SystemExit as exit_:
        assert exit_.code == 2
    assert "duplicate_rate is a share" in capsys.readouterr().err


def test_two_live_runs_without_a_seed_send_new_events(collector, capsys):
    """A live run is new traffic: a second one must not resend the first one's ids (the batch
    layer would keep them once, the speed layer count them again)."""
    argv = ["--url", collector.url, "--write-key", "k", "--events", "50", "--rate", "100000"]
    seeds = []
    for _ in range(2):
        assert main([*argv, "--time-mode", "live", "--no-progress"]) == 0
        seeds.append(json.loads(capsys.readouterr().out)["seed"])
    ids = [e["messageId"] for r in collector.requests for e in r.body["batch"]]
    assert seeds[0] != seeds[1] and len(ids) == 100 and len(set(ids)) == 100
    assert main([*argv, "--time-mode", "live", "--no-progress", "--seed", str(seeds[0])]) == 0
    again = [e["messageId"] for r in collector.requests for e in r.body["batch"]][100:]
    assert again == ids[:50]  # a seed given is the run given: the same events again
