"""The long-running processes in Terraform: each runs the command its local service runs,
on the port its settings give, behind the load balancer its users need."""

from __future__ import annotations

from core.settings import Settings


def _services(terraform_root, parse_dir, labelled, unquote) -> dict[str, dict]:
    modules = labelled(parse_dir(terraform_root / "modules" / "platform")["module"])
    return {
        name: {key: unquote(value) for key, value in body.items()}
        for name, body in modules.items()
        if unquote(body["source"]) == "../service"
    }


def test_the_collector_and_serving_are_deployed(terraform_root, parse_dir, labelled, unquote):
    services = _services(terraform_root, parse_dir, labelled, unquote)
    assert set(services) == {"collector", "serving"}  # the speed layer is on EMR Serverless
    settings = Settings()
    commands = {name: [unquote(c) for c in s["command"]] for name, s in services.items()}
    assert commands == {
        "collector": ["python", "-m", "ingest"],
        "serving": ["python", "-m", "serving", "serve"],
    }
    ports = {name: s["port"] for name, s in services.items()}
    assert ports == {"collector": settings.collector.port, "serving": settings.serving.port}
    # Browsers reach the collector; analysts reach serving inside the network.
    assert services["collector"]["load_balanced"] and services["collector"]["public"]
    assert services["serving"]["load_balanced"] and not services["serving"]["public"]
    for service in services.values():  # the settings and secrets of the platform, and its network
        assert "local.service_common" in service["platform"]


def test_each_service_runs_one_process_per_vcpu_of_its_task(
    terraform_root, parse_dir, labelled, unquote
):
    services = _services(terraform_root, parse_dir, labelled, unquote)
    for name, service in services.items():
        environment = {k: unquote(v) for k, v in service.get("environment", {}).items()}
        workers = f"WAP_{name.upper()}__WORKERS"
        # The settings' default (two, for a laptop's cores) would share one vCPU.
        assert environment.get(workers) == str(max(1, int(service["cpu"]) // 1024)), name


def _resources(parsed: dict, kind: str, unquote) -> dict[str, dict]:
    return {unquote(name): body for block in parsed.get("resource", [])
            for t, named in block.items() if unquote(t) == kind
            for name, body in named.items()}  # fmt: skip


def _data(parsed: dict, kind: str, unquote) -> dict[str, dict]:
    return {unquote(name): body for block in parsed.get("data", [])
            for t, named in block.items() if unquote(t) == kind
            for name, body in named.items()}  # fmt: skip


def test_the_speed_layer_runs_on_its_own_emr_serverless_application(
    terraform_root, parse_dir, unquote
):
    spark = parse_dir(terraform_root / "modules" / "spark")
    apps = _resources(spark, "aws_emrserverless_application", unquote)
    assert set(apps) == {"this", "speed"}
    batch, speed = apps["this"], apps["speed"]
    # One Spark runtime, network, job settings and job role; a capacity cap of its own.
    for key in ("release_label", "type", "architecture", "network_configuration"):
        assert speed[key] == batch[key], key
    assert speed["runtime_configuration"] == batch["runtime_configuration"]
    assert speed["maximum_capacity"][0]["cpu"] == "${var.speed_max_cpu}"
    assert batch["maximum_capacity"][0]["cpu"] == "${var.max_cpu}"
    log_uri = speed["monitoring_configuration"][0]["s3_monitoring_configuration"][0]["log_uri"]
    assert unquote(log_uri).endswith("/spark/speed/")

    assume = _data(spark, "aws_iam_policy_document", unquote)["assume"]["statement"][0]
    source_arns = assume["condition"][0]["values"]
    assert source_arns == [
        "${aws_emrserverless_application.this.arn}",
        "${aws_emrserverless_application.speed.arn}",
    ]
    policies = _data(spark, "aws_iam_policy_document", unquote)
    job = {unquote(s["sid"]): [unquote(r) for r in s["resources"]]
           for s in policies["job"]["statement"] if isinstance(s["resources"], list)}  # fmt: skip
    # The checkpoints every attempt and every replacement resume.
    assert "${var.bucket_arn}/${var.prefixes.checkpoints}/*" in job["ReadWriteTablesAndCheckpoints"]

    # Only the deployer may run it: the speed application's runs, the job role passed.
    run, pass_role = policies["speed_deployer"]["statement"]
    assert [unquote(r) for r in run["resources"]] == [
        "${aws_emrserverless_application.speed.arn}",
        "${aws_emrserverless_application.speed.arn}/jobruns/*",
    ]
    actions = {unquote(action) for action in run["actions"]}
    assert {"emr-serverless:StartJobRun", "emr-serverless:CancelJobRun"} <= actions
    assert pass_role["resources"] == ["${aws_iam_role.job.arn}"]


def test_the_platform_hands_the_speed_application_to_the_deploy_not_to_an_ecs_task(
    terraform_root, unquote
):
    text = (terraform_root / "modules" / "platform" / "main.tf").read_text()
    assert "speed_application_id" in text.split("speed_job_env = {", 1)[1].split("}", 1)[0]
    assert '"speed_layer"' not in text  # no task runs `python -m speed_layer` in local mode
    assert "WAP_SPARK__MASTER" not in text


def test_load_balancers_check_health_and_speak_tls_only(terraform_root, parse_dir, unquote):
    resources = parse_dir(terraform_root / "modules" / "service")["resource"]

    def bodies(kind: str) -> list[dict]:
        return [body for block in resources for t, named in block.items() if unquote(t) == kind
                for body in named.values()]  # fmt: skip

    (group,) = bodies("aws_lb_target_group")
    assert unquote(group["health_check"][0]["path"]) == "/health"
    listeners = {unquote(b["protocol"]): b for b in bodies("aws_lb_listener")}
    assert unquote(listeners["HTTPS"]["ssl_policy"]).startswith("ELBSecurityPolicy-TLS13")
    redirect = listeners["HTTP"]["default_action"][0]["redirect"][0]
    assert unquote(redirect["protocol"]) == "HTTPS"
    (policy,) = bodies("aws_appautoscaling_policy")
    spec = policy["target_tracking_scaling_policy_configuration"][0]
    metric = spec["predefined_metric_specification"][0]["predefined_metric_type"]
    assert unquote(metric) == "ECSServiceAverageCPUUtilization"
