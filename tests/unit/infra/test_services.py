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


def test_the_collector_serving_and_speed_layer_are_deployed(
    terraform_root, parse_dir, labelled, unquote
):
    services = _services(terraform_root, parse_dir, labelled, unquote)
    assert set(services) == {"collector", "serving", "speed"}
    settings = Settings()
    commands = {name: [unquote(c) for c in s["command"]] for name, s in services.items()}
    assert commands == {
        "collector": ["python", "-m", "ingest"],
        "serving": ["python", "-m", "serving", "serve"],
        "speed": ["python", "-m", "speed_layer"],
    }
    ports = {name: s["port"] for name, s in services.items()}
    assert ports == {
        "collector": settings.collector.port,
        "serving": settings.serving.port,
        "speed": settings.speed.metrics_port,
    }
    # Browsers reach the collector; analysts reach serving inside the network; nobody the
    # speed layer, which never runs twice (one checkpoint).
    assert services["collector"]["load_balanced"] and services["collector"]["public"]
    assert services["serving"]["load_balanced"] and not services["serving"]["public"]
    assert not services["speed"]["load_balanced"]
    assert services["speed"]["min_tasks"] == services["speed"]["max_tasks"] == 1
    for service in services.values():  # the settings and secrets of the platform, and its network
        assert "local.service_common" in service["platform"]


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
