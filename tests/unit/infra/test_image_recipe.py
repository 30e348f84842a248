"""The image Terraform deploys (infra/image): a pinned base, a fixed non-root user, a health
check for each service Terraform runs from it, the jars where the settings look, and the
Python pins of requirements/main.lock, each with its hashes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from core.healthcheck import target
from core.settings import Settings
from core.spark import local_spark_jars
from platformctl.image import IMAGE_DIR, LOCK, read_recipe

ROOT = IMAGE_DIR.parents[1]
RECIPE = read_recipe((IMAGE_DIR / "Dockerfile").read_text(), {"VERSION": "0", "REVISION": "0"})
INSTALL = (IMAGE_DIR / "install.sh").read_text()
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.MULTILINE)
BUILD_ONLY = {"setuptools", "wheel"}
"""Pinned in image.lock for pip to build pyspark's source archive offline."""


@pytest.fixture
def image_settings(monkeypatch) -> Settings:
    """The settings a container of the image reads before the deployment adds its own."""
    for name, value in RECIPE.env.items():
        if name.startswith("WAP_"):
            monkeypatch.setenv(name, value)
    return Settings()


def test_the_base_is_a_dated_debian_bookworm_slim_pinned_by_its_digest():
    assert re.fullmatch(r"debian:bookworm-\d{8}-slim@sha256:[0-9a-f]{64}", RECIPE.base)


def test_processes_run_as_the_task_definition_s_fixed_non_root_user(terraform_root):
    uid, _, gid = RECIPE.user.partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) != 0 and int(gid) != 0
    assert f"useradd --uid {uid} --gid {gid} " in INSTALL
    task = (terraform_root / "modules" / "service" / "main.tf").read_text()
    assert re.search(r'^\s*user\s*=\s*"(\d+)"', task, re.MULTILINE).group(1) == uid
    assert "readonlyRootFilesystem = true" in task
    assert RECIPE.workdir == RECIPE.env["HOME"] == "/tmp"  # the one writable place


def test_each_service_terraform_runs_from_the_image_has_its_health_probed(
    terraform_root, parse_dir, labelled, unquote, image_settings
):
    assert RECIPE.healthcheck == ("python", "-m", "core.healthcheck")
    assert RECIPE.entrypoint == ("/usr/bin/tini", "--")  # the command follows: ECS's, or CMD
    modules = labelled(parse_dir(terraform_root / "modules" / "platform")["module"])
    services = [body for body in modules.values() if unquote(body["source"]) == "../service"]
    # The collector and serving (the speed job is an EMR Serverless run, not a service).
    assert len(services) == 2
    commands = []
    for service in services:
        command = [unquote(word) for word in service["command"]]
        path = "/health" if service["load_balanced"] else "/metrics"
        url = f"http://127.0.0.1:{service['port']}{path}"
        assert target([*RECIPE.entrypoint, *command], image_settings) == url, command
        assert str(service["port"]) in RECIPE.ports
        commands.append(command)
    assert list(RECIPE.cmd) in commands


def test_the_settings_find_the_jars_and_the_bundle_where_install_puts_them(image_settings):
    state = Path(RECIPE.env["WAP_LOCAL__STATE_DIR"])
    assert image_settings.local.state_dir == state
    (copy,) = [line for line in INSTALL.splitlines() if line.startswith('cp -R "$context/jars"')]
    assert copy == f'cp -R "$context/jars" "$context/npm" {state}/'
    with pytest.raises(FileNotFoundError, match=str(state / "jars" / "spark")):
        local_spark_jars(image_settings.local.state_dir)  # not on this machine: in the image
    # Servers listen beyond the container's loopback; the venv install.sh makes is first.
    assert image_settings.collector.host == image_settings.serving.host == "0.0.0.0"
    assert image_settings.speed.metrics_host == "0.0.0.0"
    venv = RECIPE.env["PATH"].split(":")[0].removesuffix("/bin")
    assert f"python3 -m venv {venv}\n" in INSTALL


def test_no_secret_is_baked_into_the_image():
    secret_fields = re.compile(r"PASSWORD|TOKEN|WRITE_KEYS|SECRET|_KEY\b", re.IGNORECASE)
    assert not [name for name in RECIPE.env if secret_fields.search(name)]


def test_the_image_lock_pins_main_lock_s_runtime_versions_with_hashes():
    main = dict(_PIN.findall((ROOT / "requirements" / "main.lock").read_text()))
    text = LOCK.read_text()
    image = dict(_PIN.findall(text))
    assert {name: version for name, version in image.items() if main.get(name) != version} == {
        name: image[name] for name in BUILD_ONLY
    }
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    assert all("--hash=sha256:" in entry for entry in entries), "every pin needs its hashes"
    runtime = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[\[=<>~ ]", dep, maxsplit=1)[0].lower() for dep in runtime}
    assert names <= set(image), names - set(image)
    assert not {"pytest", "ruff", "hypothesis", "selenium", "python-hcl2"} & set(image)
