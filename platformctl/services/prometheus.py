"""Prometheus (Debian's ``prometheus`` package) as a local service: it scrapes the
platform's services and evaluates the platform's alert rules.

:func:`write_config` renders ``prometheus.yml`` and ``alerts.yml`` from
``infra/local/prometheus/*.tmpl`` with the ports and the thresholds of
:class:`core.settings.MonitoringSettings` under ``<state>/prometheus/``; the
TSDB lives there too. ``make status`` shows its address, the targets up and
the alerts firing.

It listens on 127.0.0.1 only, without its lifecycle API (``/-/quit``,
``/-/reload``) unless ``monitoring.lifecycle_api`` asks for it; it reloads
its configuration on ``SIGHUP``. The collector's, serving's and the step
server's ``/metrics`` take the operators' ``monitoring.metrics_token``:
Prometheus sends it from a file only its user reads (``metrics.token``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from string import Template

from core.settings import PROJECT_ROOT, Settings
from platformctl.process import ManagedProcess
from platformctl.services.base import Service, logs_dir, run_dir

__all__ = ["SERVICE", "healthy", "install", "process", "render_rules", "write_config"]

TEMPLATE_DIR = PROJECT_ROOT / "infra" / "local" / "prometheus"
_PERIOD_S = {"minute": 60, "hour": 3600, "day": 86400}


def _home(settings: Settings) -> Path:
    return settings.local.state_dir / "prometheus"


def _loopback(host: str) -> str:
    return "127.0.0.1" if host == "0.0.0.0" else host


def render_rules(settings: Settings) -> str:
    """The alert rules with this deployment's thresholds (``promtool``-checkable YAML)."""
    monitoring, batch = settings.monitoring, settings.batch
    publish_s = monitoring.publish_alert_periods * _PERIOD_S[batch.period] + batch.lateness_s
    return Template((TEMPLATE_DIR / "alerts.yml.tmpl").read_text()).substitute(
        freshness_alert_s=monitoring.freshness_alert_s,
        freshness_alert_for=monitoring.freshness_alert_for,
        publish_alert_s=publish_s,
        error_ratio_alert=monitoring.error_ratio_alert,
    )


def _metrics_token(settings: Settings, home: Path) -> Path:
    """The file of the bearer token Prometheus scrapes the services with (mode 0600)."""
    path = home / "metrics.token"
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(settings.monitoring.metrics_token.get_secret_value())
    return path


def write_config(settings: Settings) -> Path:
    """``prometheus.yml`` (and the rules and the metrics token beside it) under the state
    directory; its path."""
    home = _home(settings)
    home.mkdir(parents=True, exist_ok=True)
    rules = home / "alerts.yml"
    rules.write_text(render_rules(settings))
    token_file = _metrics_token(settings, home)
    config = home / "prometheus.yml"
    config.write_text(
        Template((TEMPLATE_DIR / "prometheus.yml.tmpl").read_text()).substitute(
            scrape_interval=f"{settings.monitoring.scrape_interval_s}s",
            environment=settings.environment,
            rules_file=str(rules),
            prometheus_port=settings.monitoring.prometheus_port,
            collector=f"{_loopback(settings.collector.host)}:{settings.collector.port}",
            serving=f"{_loopback(settings.serving.host)}:{settings.serving.port}",
            metrics_token_file=str(token_file),
            speed=f"{_loopback(settings.speed.metrics_host)}:{settings.speed.metrics_port}",
            batch=f"{_loopback(settings.batch.step_server_host)}:{settings.batch.step_server_port}",
        )
    )
    return config


def install(settings: Settings) -> Path:
    """The ``prometheus`` binary (Debian's package, installed when missing)."""
    from platformctl.install import install_prometheus

    return install_prometheus()


def process(settings: Settings) -> ManagedProcess:
    """Prometheus on loopback, its config and TSDB under ``<state>/prometheus``; the
    lifecycle API only when ``monitoring.lifecycle_api`` is set."""
    config = write_config(settings)
    port = settings.monitoring.prometheus_port
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    lifecycle = ["--web.enable-lifecycle"] if settings.monitoring.lifecycle_api else []
    return ManagedProcess(
        name="prometheus",
        argv=[
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={_home(settings) / 'data'}",
            "--storage.tsdb.retention.time=15d",
            f"--web.listen-address=127.0.0.1:{port}",
            *lifecycle,
        ],
        pid_file=run_dir(settings) / "prometheus.pid",
        log_file=logs_dir(settings) / "prometheus.log",
        marker=str(config),
        ports=(port,),
    )


def healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: ``/-/ready``; detail = its address, the targets up and the alerts firing."""
    import httpx

    base = f"http://127.0.0.1:{settings.monitoring.prometheus_port}"
    try:
        if httpx.get(f"{base}/-/ready", timeout=5).status_code != 200:
            return False, "not ready"
        targets = httpx.get(f"{base}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
        alerts = httpx.get(f"{base}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    except httpx.HTTPError as error:
        return False, f"{base}: {error}"
    up = sorted(t["labels"]["job"] for t in targets if t["health"] == "up")
    firing = sorted({a["labels"]["alertname"] for a in alerts if a["state"] == "firing"})
    return True, (
        f"{base} (alerts: {base}/alerts); targets up {len(up)}/{len(targets)}; "
        f"firing: {', '.join(firing) or 'none'}"
    )


SERVICE = Service(name="prometheus", process=process, probe=healthy, install=install)
