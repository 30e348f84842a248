import cProfile, pstats, time, io
import pytest
from batch_layer.__main__ import PIPELINE_STEPS, run_step
from batch_layer.pipelines import WEB_EVENTS
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct

pytestmark = [pytest.mark.integration]

def _jobs(spark):
    t = spark.sparkContext.statusTracker()
    return len(t.getJobIdsForGroup(None) or [])

def test_profile(spark, pipeline_settings):
    settings = pipeline_settings
    out = []
    for run in range(3):
        produce_direct(generate(SimulatorConfig(seed=100 + run, events=2000)), settings)
        prof = cProfile.Profile()
        for step in PIPELINE_STEPS:
            j0 = _jobs(spark); t0 = time.perf_counter()
            if run == 2: prof.enable()
            run_step(spark, settings, step, WEB_EVENTS, f"run-{run}", None)
            if run == 2: prof.disable()
            out.append(f"jobs {j0}..{_jobs(spark)} run {run} {step:14s} {time.perf_counter()-t0:6.2f}s jobs {_jobs(spark)-j0}")
    import json, urllib.request, collections
    ui = spark.sparkContext.uiWebUrl
    app = spark.sparkContext.applicationId
    jobs = json.load(urllib.request.urlopen(f"{ui}/api/v1/applications/{app}/jobs"))
    lines = []
    for j in sorted(jobs, key=lambda j: j["jobId"]):
        from datetime import datetime
        f = lambda t: datetime.strptime(t.replace("GMT",""), "%Y-%m-%dT%H:%M:%S.%f")
        d = (f(j["completionTime"]) - f(j["submissionTime"])).total_seconds() if j.get("completionTime") else -1
        lines.append(f'{j["jobId"]:5d} {d:6.2f}s stages {len(j["stageIds"])} tasks {j["numTasks"]:4d} {j["name"][:90]}')
    open("/tmp/prof/jobs.txt", "w").write("\n".join(lines))
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(90)
    open("/tmp/prof/steps.txt", "w").write("\n".join(out) + "\n\n" + s.getvalue())
