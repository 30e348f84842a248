"""The services' image: its configuration read from the Dockerfile for both builds, and the
build context holding the jars and the bundle ``make install`` fetched."""

from __future__ import annotations

import json

import pytest

from core.settings import LocalSettings, Settings
from platformctl.image import (
    IMAGE_DIR,
    LOCK,
    buildah_config,
    mmdebstrap_command,
    prepare_context,
    read_recipe,
)

DOCKERFILE = (IMAGE_DIR / "Dockerfile").read_text()


def _options(argv: list[str]) -> list[tuple[str, str]]:
    return list(zip(argv[::2], argv[1::2], strict=True))


def test_the_dockerfile_configuration_is_what_buildah_applies():
    recipe = read_recipe(DOCKERFILE, {"VERSION": "9.8.7", "REVISION": "abc123"})
    options = _options(buildah_config(recipe))
    assert ("--user", recipe.user) in options
    assert ("--workingdir", recipe.workdir) in options
    assert ("--healthcheck", "CMD python -m core.healthcheck") in options
    assert ("--healthcheck-interval", "15s") in options
    assert ("--healthcheck-start-period", "120s") in options
    assert ("--entrypoint", json.dumps(list(recipe.entrypoint))) in options
    assert ("--cmd", '["python", "-m", "ingest"]') in options
    assert ("--label", "org.opencontainers.image.version=9.8.7") in options
    assert ("--label", "org.opencontainers.image.revision=abc123") in options
    assert {value for flag, value in options if flag == "--port"} == {
        "8088/tcp",
        "8090/tcp",
        "8096/tcp",
    }
    env = dict(value.split("=", 1) for flag, value in options if flag == "--env")
    assert env == recipe.env
    assert env["PATH"].startswith("/opt/wap/venv/bin:")


def test_the_root_filesystem_is_a_slim_bookworm_where_install_sh_runs_untouched(tmp_path):
    argv = mmdebstrap_command(tmp_path / "context", tmp_path / "rootfs.tar")
    assert argv[:2] == ["mmdebstrap", "--variant=minbase"]
    suite = argv.index("bookworm")
    assert argv[suite + 1] == str(tmp_path / "rootfs.tar")
    mirrors = argv[suite + 2 :]
    assert [m.split()[2] for m in mirrors] == ["bookworm", "bookworm-updates", "bookworm-security"]
    assert "--dpkgopt=path-exclude=/usr/share/man/*" in argv
    hooks = [a.removeprefix("--customize-hook=") for a in argv if a.startswith("--customize")]
    assert hooks[0] == f"copy-in {tmp_path / 'context'} /tmp"
    # install.sh sees a RUN's environment, none of this host's (pip settings, proxies).
    assert hooks[1].startswith('chroot "$1" env -i HOME=/root PATH=/usr/local/sbin:')
    assert hooks[1].endswith(" sh /tmp/context/install.sh /tmp/context")
    assert hooks[2] == 'rm -rf "$1/tmp/context"'


def test_a_recipe_missing_what_configures_the_image_is_refused():
    without_user = "\n".join(
        line for line in DOCKERFILE.splitlines() if not line.startswith("USER")
    )
    with pytest.raises(ValueError, match="USER"):
        read_recipe(without_user)


def test_continuations_and_only_the_final_stage_count():
    recipe = read_recipe(
        'FROM a AS build\nENV A=1\nUSER 0\nFROM debian:x@sha256:00\nENV B="two words" \\\n'
        "    C=3\n# a comment\nUSER 1000:1000\nWORKDIR /tmp\n"
        'HEALTHCHECK --retries=2 CMD ["true"]\nENTRYPOINT ["tini"]\nCMD ["sh"]\n'
    )
    assert recipe.base == "debian:x@sha256:00"
    assert recipe.env == {"B": "two words", "C": "3"}
    assert recipe.healthcheck == ("true",) and recipe.healthcheck_options == {"retries": "2"}


@pytest.mark.slow  # builds the wheel
def test_the_context_holds_the_recipe_the_lock_the_wheel_and_the_installed_jars(tmp_path):
    state = tmp_path / "state"
    jars = state / "jars" / "spark"
    jars.mkdir(parents=True)
    for name in ("delta-spark_4.1_2.13-4.4.0.jar", "spark-sql-kafka-0-10_2.13-4.1.3.jar"):
        (jars / name).write_bytes(b"PK\x03\x04" + name.encode())
    bundle = state / "npm" / "node_modules" / "@segment" / "analytics-next" / "dist" / "umd"
    bundle.mkdir(parents=True)
    (bundle / "standalone.js").write_text("/* analytics.js */")
    settings = Settings(local=LocalSettings(state_dir=state))
    out = tmp_path / "context"
    (out / "jars" / "spark").mkdir(parents=True)
    (out / "jars" / "spark" / "removed-since.jar").write_bytes(b"PK")

    wheel = prepare_context(settings, out, dependencies=False)

    assert sorted(p.name for p in (out / "jars" / "spark").iterdir()) == sorted(
        p.name for p in jars.iterdir()
    )
    copied = out / "npm" / "node_modules" / "@segment" / "analytics-next" / "dist" / "umd"
    assert (copied / "standalone.js").read_text() == "/* analytics.js */"
    assert (out / "Dockerfile").read_text() == DOCKERFILE
    assert (out / "install.sh").read_bytes() == (IMAGE_DIR / "install.sh").read_bytes()
    assert (out / "requirements.lock").read_text() == LOCK.read_text()
    assert wheel.parent == out / "wheels" and wheel.name.startswith("web_activity_platform-")


def test_a_context_without_the_installed_bundle_says_to_install(tmp_path):
    (tmp_path / "jars" / "spark").mkdir(parents=True)
    (tmp_path / "jars" / "spark" / "delta-spark.jar").write_bytes(b"PK")
    settings = Settings(local=LocalSettings(state_dir=tmp_path))
    with pytest.raises(FileNotFoundError, match="make install"):
        prepare_context(settings, tmp_path / "context", dependencies=False)
