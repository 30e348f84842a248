"""``platformctl``: the one entry point for running the platform on this machine."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

from core.log import configure_logging
from core.settings import load_settings
from platformctl import platform
from platformctl.access import access_command, add_access_parser
from platformctl.process import ServiceStartError, log_tail

__all__ = ["main"]


_GROUPS = {
    "airflow": platform.AIRFLOW_SERVICES,
    "kafka-cluster": platform.KAFKA_CLUSTER_SERVICES,
    "spark": platform.SPARK_CLUSTER,
    "cassandra-ring": platform.CASSANDRA_RING,
}
"""Names that stand for several services on the command line."""


def _services(names: list[str]) -> tuple[str, ...]:
    """The services named (all when none), groups expanded, in start order."""
    if not names:
        return platform.SERVICES
    wanted = {service for name in names for service in _GROUPS.get(name, (name,))}
    return tuple(name for name in platform.SERVICES if name in wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="platformctl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    install = commands.add_parser("install", help="fetch jars and create the Airflow venv")
    install.add_argument("--no-airflow", action="store_true", help="skip the Airflow venv")
    for name, text in [
        ("up", "start services (no-op if running)"),
        ("down", "stop the services this platform started"),
    ]:
        sub = commands.add_parser(name, help=text)
        sub.add_argument("services", nargs="*", choices=[*platform.SERVICES, *_GROUPS, []])
    status = commands.add_parser("status", help="each service: state, port, pid, memory, probe")
    status.add_argument("--json", action="store_true")
    logs = commands.add_parser("logs", help="print the tail of each service's log")
    logs.add_argument("services", nargs="*", choices=[*platform.SERVICES, *_GROUPS, []])
    logs.add_argument("-n", "--lines", type=int, default=40)
    commands.add_parser("demo", help="bring the platform up and run the end-to-end path")
    package = commands.add_parser(
        "package", help="build the artifact the batch steps run from on a cluster (EMR)"
    )
    package.add_argument("--out", type=Path, default=Path("dist") / "artifact")
    package.add_argument(
        "--pyenv", action="store_true", help="also pack the Python environment (cluster's OS)"
    )
    speed_deploy = commands.add_parser(
        "speed-deploy",
        help="production: start the streaming speed job on EMR Serverless unless one runs",
    )
    speed_deploy.add_argument(
        "--replace",
        action="store_true",
        help="cancel the running job, wait until it has ended, start it anew (a new artifact)",
    )
    commands.add_parser(
        "speed-status", help="production: the speed job's run on EMR Serverless (state, attempt)"
    )
    image = commands.add_parser(
        "image", help="the services' container image (infra/image): its context, or built here"
    )
    image_steps = image.add_subparsers(dest="step", required=True)
    context = image_steps.add_parser(
        "context", help="prepare the build context and print the `docker build` line"
    )
    context.add_argument("--out", type=Path, default=Path("dist") / "image" / "context")
    build = image_steps.add_parser(
        "build", help="build it from Debian packages (mmdebstrap, buildah) into an image archive"
    )
    build.add_argument("--out", type=Path, default=Path("dist") / "image")
    forget = commands.add_parser(
        "forget", help="forget a user: erase their events everywhere, republish their days"
    )
    forget.add_argument("--user", required=True, help="the person's id to forget")
    forget.add_argument(
        "--pipeline",
        action="append",
        default=[],
        help="a pipeline to forget them in (repeatable; default: every pipeline whose "
        "declaration names identity fields)",
    )
    forget.add_argument(
        "--in-process", action="store_true", help="run the steps here even when Airflow is up"
    )
    add_access_parser(commands)
    args = parser.parse_args(argv)

    configure_logging()
    settings = load_settings()
    try:
        if args.command == "install":
            from platformctl.install import install as run_install

            run_install(settings, airflow=not args.no_airflow)
        elif args.command == "up":
            timings = platform.up(settings, _services(args.services))
            print(json.dumps({"up": timings}))
        elif args.command == "down":
            print(json.dumps({"stopped": platform.down(settings, _services(args.services))}))
        elif args.command == "status":
            rows = platform.status(settings)
            if args.json:
                print(json.dumps([asdict(r) for r in rows], default=str, indent=2))
            else:
                _print_status(rows)
            return 0 if all(r.healthy for r in rows) else 3
        elif args.command == "logs":
            for process in platform.processes(settings).values():
                if process.name in _services(args.services):
                    print(f"==> {process.log_file} <==")
                    print(log_tail(process.log_file, args.lines))
        elif args.command == "demo":
            from platformctl.demo import run_demo

            started = time.monotonic()
            run_demo(settings)
            print(f"demo finished in {time.monotonic() - started:.0f}s")
        elif args.command == "package":
            from platformctl.package import build_artifact

            manifest = build_artifact(settings, args.out, pyenv=args.pyenv)
            print(json.dumps({"out": str(args.out), "files": len(manifest["files"])}))
        elif args.command in ("speed-deploy", "speed-status"):
            return _speed_job(settings, args)
        elif args.command == "image":
            from platformctl import image as container_image

            if args.step == "context":
                wheel = container_image.prepare_context(settings, args.out)
                print(shlex.join(container_image.docker_build_command(args.out, wheel)))
            else:
                print(json.dumps({"archive": str(container_image.build_image(settings, args.out))}))
        elif args.command == "access":
            report, code = access_command(settings, args)
            print(json.dumps(report, indent=2))
            return code
        elif args.command == "forget":
            from platformctl.forget import forget_user

            report, code = forget_user(
                settings, args.user, args.pipeline, in_process=args.in_process
            )
            print(json.dumps(report, default=str, indent=2))
            return code
    except ServiceStartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _speed_job(settings, args: argparse.Namespace) -> int:
    """``speed-deploy`` / ``speed-status`` against EMR Serverless, with the caller's AWS
    credentials: 0 when done (status: the run is RUNNING), 1 when AWS or the old run's end
    stopped it, 2 when the settings do not allow it, 3 when no run is RUNNING."""
    from botocore.exceptions import BotoCoreError, ClientError

    from platformctl.speed_deploy import DeployError, application, deploy, emr_client, status
    from speed_layer.emr import check

    try:
        # The settings are checked first: a refusal needs no AWS access.
        if args.command == "speed-deploy":
            check(settings)
        else:
            application(settings)
        client = emr_client()
        if args.command == "speed-deploy":
            report = deploy(client, settings, replace=args.replace)
        else:
            report = status(client, settings)
    except ValueError as exc:
        print(json.dumps({"refused": str(exc)}))
        return 2
    except (DeployError, BotoCoreError, ClientError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(report, indent=2))
    if args.command == "speed-status" and (report["run"] or {}).get("state") != "RUNNING":
        return 3
    return 0


def _print_status(rows: list[platform.ServiceStatus]) -> None:
    width = max(len(r.name) for r in rows)
    print(f"{'service':<{width}} {'state':<9} {'port':>5} {'pid':>7} {'rss MB':>7}  log / probe")
    for r in rows:
        state = "healthy" if r.healthy else ("starting" if r.running else "down")
        rss = f"{r.rss_mb:.0f}" if r.rss_mb else "-"
        print(f"{r.name:<{width}} {state:<9} {r.port:>5} {r.pid or '-':>7} {rss:>7}  {r.log_file}")
        print(f"{'':<{width + 34}}{r.detail}")
