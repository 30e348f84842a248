"""The operator endpoints of the services ``platformctl`` runs, attacked on a second,
isolated platform: Kafka's JMX, Prometheus' lifecycle API, Airflow's ``/auth/token``.

Each service comes up through ``platformctl`` with its own state directory and free ports,
exactly as ``make up`` starts it, so the main platform others use is not touched.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import stat
from pathlib import Path

import httpx
import pytest

from core.settings import (
    AirflowSettings,
    KafkaSettings,
    LocalSettings,
    MonitoringSettings,
    Settings,
)
from pipelines import PIPELINES
from platformctl import platform
from platformctl.services.airflow import passwords_file
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture
def isolated(settings: Settings, isolated_state: Path, tmp_path: Path):
    isolated = settings.model_copy(
        update={
            "kafka": KafkaSettings(bootstrap_servers=f"127.0.0.1:{free_port()}"),
            "monitoring": MonitoringSettings(prometheus_port=free_port()),
            "airflow": AirflowSettings(
                home=tmp_path / "airflow",
                venv=settings.airflow.venv,
                dags_folder=tmp_path / "dags",
                api_port=free_port(),
                admin_password="operator-test-password",
            ),
            "local": LocalSettings(state_dir=isolated_state, kafka_controller_port=free_port()),
        }
    )
    (tmp_path / "dags").mkdir()
    yield isolated
    platform.down(isolated)


def _listening(pid: int) -> set[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """The (address, port) of every TCP socket process ``pid`` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            # /proc writes each 32-bit word of the address in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add((ipaddress.ip_address(raw), int(port, 16)))
    return found


def _loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or bool(mapped and mapped.is_loopback)


def _other_address() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: it only picks a route
            return probe.getsockname()[0]
        except OSError:
            return None


def test_kafka_listens_on_loopback_only_and_opens_no_jmx_port(isolated: Settings):
    platform.up(isolated, ("kafka",))
    (kafka,) = [s for s in platform.status(isolated) if s.name == "kafka"]
    listening = _listening(kafka.pid)
    broker = int(isolated.kafka.bootstrap_servers.rsplit(":", 1)[1])
    assert {port for _, port in listening} == {broker, isolated.local.kafka_controller_port}
    assert all(_loopback(address) for address, _ in listening), listening
    other = _other_address()
    if other is not None and not ipaddress.ip_address(other).is_loopback:
        for _, port in listening:
            with pytest.raises(OSError), socket.create_connection((other, port), timeout=3):
                pass


def test_prometheus_refuses_its_lifecycle_api(isolated: Settings):
    platform.up(isolated, ("prometheus",))
    base = f"http://127.0.0.1:{isolated.monitoring.prometheus_port}"
    for method, path in (("POST", "/-/quit"), ("PUT", "/-/quit"), ("POST", "/-/reload")):
        answer = httpx.request(method, f"{base}{path}", timeout=10)
        assert answer.status_code == 403 and "not enabled" in answer.text, (path, answer.text)
    assert httpx.get(f"{base}/-/ready", timeout=10).status_code == 200


def test_airflow_hands_a_token_only_for_the_admin_password(isolated: Settings):
    # up provisions the pools through the REST API: platformctl's client gets its token.
    platform.up(isolated, ("airflow-api-server",))
    base = f"http://127.0.0.1:{isolated.airflow.api_port}"
    assert httpx.get(f"{base}/auth/token", timeout=10).status_code == 403
    assert httpx.get(f"{base}/auth/token/login", timeout=10).status_code == 403
    assert httpx.post(f"{base}/auth/token", json={}, timeout=10).status_code in (400, 422)
    wrong = {"username": "admin", "password": "guess"}
    assert httpx.post(f"{base}/auth/token", json=wrong, timeout=10).status_code == 401
    assert httpx.post(f"{base}/auth/token", data=wrong, timeout=10).status_code == 401
    assert httpx.get(f"{base}/api/v2/pools", timeout=10).status_code == 401

    right = {"username": "admin", "password": "operator-test-password"}
    token = httpx.post(f"{base}/auth/token", json=right, timeout=10)
    assert token.status_code == 201
    headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
    pools = httpx.get(f"{base}/api/v2/pools", headers=headers, timeout=10).json()
    assert {spec.pool for spec in PIPELINES} <= {pool["name"] for pool in pools["pools"]}
    stored = passwords_file(isolated.airflow.home)
    assert stat.S_IMODE(stored.stat().st_mode) == 0o600
