"""``python -m platformctl image context|build``: the container image the services run from.

The recipe is ``infra/image/Dockerfile``; everything it puts into the image is done by
``infra/image/install.sh``. Two ways to build the same image from them:

- ``image context`` prepares ``dist/image/context``: the recipe, the project's wheel,
  ``requirements/image.lock`` with every wheel it names (downloaded here, checked against
  the lock's hashes, and again by pip in the image), the Spark connector jars and the
  analytics.js bundle ``make install`` fetched. ``docker build`` / ``podman build`` of
  that directory on the pinned Debian base is the ordinary build.
- ``image build`` needs no base image from a registry: ``mmdebstrap`` makes a Debian
  bookworm root filesystem from the Debian mirror, runs the same ``install.sh`` in it,
  and ``buildah`` turns it into an image configured as the Dockerfile says (its ENV,
  USER, WORKDIR, EXPOSE, HEALTHCHECK, ENTRYPOINT, CMD and LABELs, read from it), written
  as an archive in Docker's format, ``dist/image/web-activity-platform-<version>.docker.tar``
  (an OCI image configuration has no HEALTHCHECK: an OCI archive would drop it).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from core.log import get_logger, log_event
from core.settings import PROJECT_ROOT, Settings
from core.spark import local_spark_jars
from platformctl.package import build_wheel

__all__ = [
    "IMAGE_DIR",
    "LOCK",
    "MIRRORS",
    "NAME",
    "SLIM_EXCLUDES",
    "Recipe",
    "build_image",
    "buildah_config",
    "docker_build_command",
    "mmdebstrap_command",
    "prepare_context",
    "read_recipe",
]

_log = get_logger(__name__)
NAME = "web-activity-platform"
IMAGE_DIR = PROJECT_ROOT / "infra" / "image"
LOCK = PROJECT_ROOT / "requirements" / "image.lock"
MIRRORS = (
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
)
"""The suites the Debian base image's apt sources name."""
SLIM_EXCLUDES = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/groff/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/linda/*",
    "path-exclude=/usr/share/lintian/overrides/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/man/*",
)
"""What dpkg leaves out of a slim Debian image (documentation, manuals, translations)."""
_BUNDLE = Path("@segment") / "analytics-next" / "dist" / "umd"
_BUILD_ENV = "HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""install.sh's whole environment in the chroot, as a RUN's: nothing of this host's (its pip
configuration, proxies) reaches the build."""


@dataclass(frozen=True)
class Recipe:
    """The parts of the Dockerfile that configure the image (not how its files got there)."""

    base: str
    env: dict[str, str]
    labels: dict[str, str]
    user: str
    workdir: str
    ports: tuple[str, ...]
    healthcheck: tuple[str, ...]
    """The health command, exec form (``CMD [...]``)."""
    healthcheck_options: dict[str, str]
    """``interval``, ``timeout``, ``start-period``, ``retries``."""
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    run: tuple[str, ...]


def _instructions(text: str) -> list[tuple[str, str]]:
    """``(KEYWORD, arguments)`` per instruction: continuations joined, comments dropped."""
    found: list[tuple[str, str]] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            current += line[:-1].strip() + " "
            continue
        keyword, _, rest = (current + line).partition(" ")
        found.append((keyword.upper(), rest.strip()))
        current = ""
    return found


def _pairs(text: str, args: dict[str, str]) -> dict[str, str]:
    """``K=V`` words (ENV, LABEL), with ``${ARG}`` replaced by its build argument."""
    pairs = {}
    for word in shlex.split(text):
        key, sep, value = word.partition("=")
        if not sep:
            raise ValueError(f"{word!r}: write ENV and LABEL as KEY=value")
        pairs[key] = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), value)
    return pairs


def read_recipe(text: str, build_args: dict[str, str] | None = None) -> Recipe:
    """The configuration of the final stage of the Dockerfile ``text``."""
    args = dict(build_args or {})
    parts: dict[str, object] = {"env": {}, "labels": {}, "ports": (), "run": ()}
    for keyword, rest in _instructions(text):
        if keyword == "FROM":
            parts = {"env": {}, "labels": {}, "ports": (), "run": (), "base": rest.split()[0]}
        elif keyword == "ENV":
            parts["env"] = {**parts["env"], **_pairs(rest, args)}  # type: ignore[dict-item]
        elif keyword == "LABEL":
            parts["labels"] = {**parts["labels"], **_pairs(rest, args)}  # type: ignore[dict-item]
        elif keyword == "EXPOSE":
            parts["ports"] = (*parts["ports"], *rest.split())  # type: ignore[misc]
        elif keyword == "RUN":
            parts["run"] = (*parts["run"], rest)  # type: ignore[misc]
        elif keyword in {"USER", "WORKDIR"}:
            parts[keyword.lower()] = rest
        elif keyword in {"ENTRYPOINT", "CMD"}:
            parts[keyword.lower()] = tuple(json.loads(rest))
        elif keyword == "HEALTHCHECK":
            options, _, command = rest.partition(" CMD ")
            parts["healthcheck"] = tuple(json.loads(command))
            parts["healthcheck_options"] = dict(
                option.removeprefix("--").split("=", 1) for option in options.split()
            )
    missing = {"base", "user", "workdir", "healthcheck", "entrypoint", "cmd"} - parts.keys()
    if missing:
        raise ValueError(f"The Dockerfile has no {', '.join(sorted(missing)).upper()}.")
    return Recipe(**parts)  # type: ignore[arg-type]


def buildah_config(recipe: Recipe) -> list[str]:
    """``buildah config`` options giving an image the configuration ``recipe`` describes."""
    if any(" " in word for word in recipe.healthcheck):
        raise ValueError("buildah splits the health command on spaces: no word may hold one")
    options = ["--user", recipe.user, "--workingdir", recipe.workdir]
    for key, value in recipe.env.items():
        options += ["--env", f"{key}={value}"]
    for key, value in recipe.labels.items():
        options += ["--label", f"{key}={value}"]
    for port in recipe.ports:
        options += ["--port", port if "/" in port else f"{port}/tcp"]
    options += ["--healthcheck", "CMD " + " ".join(recipe.healthcheck)]
    for name, value in recipe.healthcheck_options.items():
        options += [f"--healthcheck-{name}", value]
    options += ["--entrypoint", json.dumps(list(recipe.entrypoint))]
    options += ["--cmd", json.dumps(list(recipe.cmd))]
    return options


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise RuntimeError(
            f"`{shlex.join(argv)}` failed (exit {done.returncode}):\n"
            + "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        )
    return done


def _replace_tree(source: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(source, target)


def prepare_context(settings: Settings, out: Path, *, dependencies: bool = True) -> Path:
    """Write the build context into ``out``; the project's wheel in it. ``dependencies``:
    also download the wheels of ``requirements/image.lock`` (kept between runs)."""
    jars = [Path(jar) for jar in local_spark_jars(settings.local.state_dir)]
    library = settings.collector.browser_library_dir or (
        settings.local.state_dir / "npm" / "node_modules"
    )
    if not (library / _BUNDLE).is_dir():
        raise FileNotFoundError(
            f"No analytics.js bundle in {library / _BUNDLE}: run `make install` "
            "(it fetches the browser libraries the collector serves)."
        )
    out.mkdir(parents=True, exist_ok=True)
    for name in ("Dockerfile", "install.sh"):
        shutil.copy(IMAGE_DIR / name, out / name)
    shutil.copy(LOCK, out / "requirements.lock")
    if (out / "jars").exists():
        shutil.rmtree(out / "jars")
    (out / "jars" / "spark").mkdir(parents=True)
    for jar in jars:
        shutil.copy(jar, out / "jars" / "spark" / jar.name)
    _replace_tree(library / _BUNDLE, out / "npm" / "node_modules" / _BUNDLE)
    wheels = out / "wheels"
    for old in wheels.glob("web_activity_platform-*.whl"):
        old.unlink()
    wheel = build_wheel(wheels)
    if dependencies:
        _download(wheels)
    log_event(_log, "image.context", out=str(out), wheel=wheel.name, jars=len(jars))
    return wheel


def _download(wheels: Path) -> None:
    """The files ``requirements/image.lock`` names, for CPython 3.11 on Linux (the image's),
    each checked against the lock's hashes."""
    if sys.version_info[:2] != (3, 11) or not sys.platform.startswith("linux"):
        raise RuntimeError(
            f"The image runs CPython 3.11 on Linux; this is {sys.version.split()[0]} on "
            f"{sys.platform}: run the command with the project's venv on Linux."
        )
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "--require-hashes", "--no-deps", "--dest", str(wheels), "-r", str(LOCK)])


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    return done.stdout.strip()


def _version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def docker_build_command(context: Path, wheel: Path) -> list[str]:
    """The ordinary build of the context (where the base image can be pulled)."""
    version = _version(wheel)
    return [
        "docker", "build", "--build-arg", f"VERSION={version}",
        "--build-arg", f"REVISION={_commit()}", "-t", f"{NAME}:{version}", str(context),
    ]  # fmt: skip


def mmdebstrap_command(context: Path, rootfs: Path) -> list[str]:
    """A minimal bookworm root filesystem (as the slim base: dpkg leaves documentation out)
    with ``install.sh`` run in it on ``context``, as the tarball ``rootfs``."""
    hooks = (
        f"copy-in {shlex.quote(str(context.resolve()))} /tmp",
        f'chroot "$1" env -i {_BUILD_ENV} sh /tmp/context/install.sh /tmp/context',
        'rm -rf "$1/tmp/context"',
    )
    return [
        "mmdebstrap",
        "--variant=minbase",
        *(f"--dpkgopt={exclude}" for exclude in SLIM_EXCLUDES),
        *(f"--customize-hook={hook}" for hook in hooks),
        "bookworm",
        str(rootfs),
        *MIRRORS,
    ]


def build_image(settings: Settings, out: Path) -> Path:
    """Build the image from Debian packages (no base image pulled) into ``out``; the path of
    its archive (Docker's format). Needs root, ``mmdebstrap``, ``buildah``, the Debian mirror."""
    for tool in ("mmdebstrap", "buildah"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"`{tool}` is not on PATH: `apt-get install -y mmdebstrap buildah`")
    context = out / "context"
    wheel = prepare_context(settings, context)
    version = _version(wheel)
    recipe = read_recipe(
        (context / "Dockerfile").read_text(), {"VERSION": version, "REVISION": _commit()}
    )
    rootfs = out / "rootfs.tar"
    log_event(_log, "image.rootfs", out=str(rootfs))
    _run(mmdebstrap_command(context, rootfs))
    image = f"localhost/{NAME}:{version}"
    archive = out / f"{NAME}-{version}.docker.tar"
    env = {**os.environ, "BUILDAH_FORMAT": "docker"}  # HEALTHCHECK is a Docker-format field
    container = _run(["buildah", "from", "scratch"], env=env).stdout.strip()
    try:
        _run(["buildah", "add", container, str(rootfs), "/"], env=env)
        _run(["buildah", "config", *buildah_config(recipe), container], env=env)
        _run(["buildah", "commit", "--quiet", container, image], env=env)
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, check=False)
    archive.unlink(missing_ok=True)
    _run(["buildah", "push", "--quiet", image, f"docker-archive:{archive}:{NAME}:{version}"])
    rootfs.unlink()
    log_event(_log, "image.built", image=image, archive=str(archive))
    return archive
