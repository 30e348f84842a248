"""The local broker's command line opens no JMX port (the integration test checks the ports)."""

from __future__ import annotations

from pathlib import Path

from platformctl.services import kafka


def test_the_broker_starts_no_jmx_connector(tmp_path: Path):
    properties = tmp_path / "server.properties"
    argv = kafka.server_command("java", tmp_path / "jars", properties, tmp_path, heap_mb=512)
    assert not [arg for arg in argv if "jmxremote" in arg or "rmi" in arg]
    assert argv[-2:] == [kafka.MAIN_CLASS, str(properties.resolve())]
