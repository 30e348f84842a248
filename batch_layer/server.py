"""The batch step server: one long-lived Spark application the DAGs' tasks submit steps to.

A ``spark-submit`` per Airflow task starts a JVM, a SparkSession and Delta's
caches every time: ~20-30 s per task on two cores, so an hourly pipeline of
seven tasks spent most of its minutes starting. ``python -m batch_layer
serve`` (the ``batch`` service of ``platformctl``) holds one SparkSession, a
driver like Livy's or Spark Connect's, and runs each step it is sent with
the same code as ``python -m batch_layer STEP`` (:func:`batch_layer.runner.run_steps`).
The HTTP routes are in :mod:`batch_layer.server_http`: ``POST /steps``,
``GET /steps/{id}`` and ``DELETE /steps/{id}`` take the bearer token of
``settings.batch.step_server_token``; ``/metrics`` and ``/health``'s figures the
operators' ``settings.monitoring.metrics_token``.

Each request runs in a thread of its own on a new session of the one
SparkContext (``spark.newSession()``: its own SQL settings, the shared
executors and caches), in a Spark job group named after it. The steps of a
pipeline run one at a time. What the server keeps and shows of a request:

- its arguments with personal ids redacted (``--user [redacted]``,
  :mod:`batch_layer.personal`), in answers, ``/health``, its own log and
  Spark's job descriptions; the step's log lines, its summary and the
  server's log are scrubbed of the ids while it runs; once it has ended the
  server holds no id of it;
- the last ``settings.batch.step_history`` finished requests, no more.

A cancel (``DELETE``, sent when Airflow kills or times out the task) stops
the step where it is: its Spark jobs are cancelled, and so is every job it
starts afterwards, and the step's thread is interrupted at its next Python
instruction, as a killed ``spark-submit`` would be (every step can be rerun
from the ledger). A step that had already ended reports how it ended: a
request says ``cancelled`` only when its step did not complete.

An exception raised inside an import leaves that module half-initialised for
every later step of the process ("partially initialized module 'yaml'"), so
the server imports what the steps import before it serves
(:func:`import_step_modules`) and holds an interrupt back while the step's
thread is importing (:func:`importing`).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import logging
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from batch_layer.metrics import BatchMetrics
from batch_layer.personal import personal_values, redact_args, scrub, scrub_all
from batch_layer.steps import STEPS
from core.log import JsonFormatter, get_logger, log_event
from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Busy", "StepCancelled", "StepRun", "StepServer", "import_step_modules", "importing"]

_log = get_logger(__name__)
_CANCEL_POLL_S = 0.2
"""How often a cancelled request's job group is cancelled again while its step runs."""
_NEEDED = [module for step in STEPS.values() for module in step.modules]
STEP_MODULES = tuple(
    dict.fromkeys(
        [
            *(m for m in _NEEDED if m.startswith("batch_layer.")),  # these import pyspark whole
            *(m for m in _NEEDED if not m.startswith("batch_layer.")),
        ]
    )
)
"""What the steps import when they first run; imported by the server before it serves."""


def import_step_modules() -> None:
    """Import :data:`STEP_MODULES`, so that no step of the server imports them under a cancel."""
    for name in STEP_MODULES:
        importlib.import_module(name)


def importing(thread: int) -> bool:
    """Whether ``thread`` is inside an import (a frame of importlib's bootstrap on its stack)."""
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class StepCancelled(BaseException):
    """Raised in a step's thread when its request is cancelled; no ``except Exception`` of a
    step catches it."""


@dataclass
class StepRun:
    """One request: its arguments (personal ids redacted), its state and what it logged."""

    id: str
    args: list[str]
    """The request's arguments as shown: :func:`batch_layer.personal.redact_args`."""
    pipeline: str
    personal: tuple[str, ...] = ()
    """The personal ids among its arguments, scrubbed from what it logs; () once it ended."""
    started: float = field(default_factory=time.time)
    exit_code: int | None = None
    summary: dict[str, Any] | None = None
    log: list[str] = field(default_factory=list)
    finished: float | None = None
    cancel_requested: bool = False
    thread: int | None = None
    """The step's thread while a cancel may interrupt it."""
    interrupt_sent: bool = False
    guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def state(self) -> str:
        """``running``, ``cancelling`` (asked to stop, not stopped yet), ``success``,
        ``failed`` or ``cancelled`` (stopped by a cancel before it completed)."""
        if self.finished is None:
            return "cancelling" if self.cancel_requested else "running"
        if self.exit_code == 0:
            return "success"
        return "cancelled" if self.cancel_requested else "failed"

    def seconds(self) -> float:
        return round((self.finished or time.time()) - self.started, 2)

    def view(self, since: int = 0) -> dict[str, Any]:
        return {
            "id": self.id,
            "args": self.args,
            "state": self.state,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "cancel_requested": self.cancel_requested,
            "seconds": self.seconds(),
            "log": self.log[since:],
            "next": len(self.log),
        }


class Busy(RuntimeError):
    """The pipeline already runs a step: ``running`` is that request."""

    def __init__(self, message: str, running: StepRun) -> None:
        super().__init__(message)
        self.running = running


class _Scrub(logging.Filter):
    """Rewrites every record while steps run: their personal ids out of the message, the
    fields and the traceback (installed on the root logger's handlers)."""

    def __init__(self, server: StepServer) -> None:
        super().__init__()
        self.server = server

    def filter(self, record: logging.LogRecord) -> bool:
        values = self.server.personal()
        if not values:
            return True
        record.msg, record.args = scrub(record.getMessage(), values), None
        fields = dict(getattr(record, "fields", {}))
        if record.exc_info:
            fields["error"] = logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, None
        if fields:
            record.fields = scrub_all(fields, values)
        return True


class _Capture(logging.Handler):
    """Copies the log records of one thread (a step run) into its run's log."""

    def __init__(self, run: StepRun, thread: int, scrubber: _Scrub) -> None:
        super().__init__()
        self.run, self.thread = run, thread
        self.setFormatter(JsonFormatter())
        self.addFilter(scrubber)

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.run.log.append(scrub(self.format(record), self.run.personal))


def _interrupt(thread: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in ``thread`` at its next Python instruction; None takes back one
    not raised yet."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread), ctypes.py_object(exception) if exception else None
    )


class StepServer:
    """The steps submitted to one SparkSession, and their runs."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark, self.settings = spark, settings
        self.runs: dict[str, StepRun] = {}
        self._busy: dict[str, str] = {}  # pipeline -> id of its running request
        self._lock = threading.Lock()
        self.started = time.time()
        self.finished = 0
        self.metrics = BatchMetrics()
        self.scrubber = _Scrub(self)

    def install_log_scrubber(self) -> None:
        """Scrub personal ids from every record the root logger's handlers write."""
        for handler in logging.getLogger().handlers:
            handler.addFilter(self.scrubber)

    def personal(self) -> tuple[str, ...]:
        """The personal ids of the requests running now."""
        return tuple(v for r in list(self.runs.values()) for v in r.personal)

    def submit(self, argv: list[str]) -> StepRun:
        """Check ``argv`` (ValueError with the CLI's message) and start the run in a thread;
        :class:`Busy` while the pipeline runs another step."""
        from batch_layer.cli import parse_step_args

        personal = personal_values(argv)
        try:
            args = parse_step_args(list(argv), raising=True)
        except ValueError as error:
            raise ValueError(scrub(str(error), personal)) from None
        with self._lock:
            if args.pipeline in self._busy:
                running = self.runs[self._busy[args.pipeline]]
                raise Busy(
                    f"Pipeline {args.pipeline!r} is running step request {running.id} "
                    f"({' '.join(running.args)}); its steps run one at a time.",
                    running,
                )
            run = StepRun(uuid.uuid4().hex[:12], redact_args(argv), args.pipeline, personal)
            self.runs[run.id] = run
            self._busy[args.pipeline] = run.id
        threading.Thread(target=self._run, args=(run, args), name=f"step-{run.id}").start()
        return run

    def _run(self, run: StepRun, args: argparse.Namespace) -> None:
        capture = _Capture(run, threading.get_ident(), self.scrubber)
        logging.getLogger().addHandler(capture)
        log_event(_log, "steps.started", id=run.id, args=run.args)
        try:
            self._execute(run, args)
        except StepCancelled:
            if run.exit_code is None:  # else the step had returned: it completed
                run.exit_code = 1
                run.log.append(f"Step request {run.id} cancelled: stopped before it completed.")
        except Exception:  # any failure of a step is the task's failure
            run.log.append(scrub(traceback.format_exc(), run.personal))
            run.exit_code = 1
        finally:
            logging.getLogger().removeHandler(capture)
            run.summary = scrub_all(run.summary, run.personal)
            with self._lock:  # the pipeline is free once the request says it has ended
                self._busy.pop(run.pipeline, None)
                run.finished = time.time()
                self.finished += 1
                self._forget_old()
            self.metrics.observe(run.pipeline, run.args, run.state, run.exit_code, run.summary)
            log_event(
                _log,
                "steps.finished",
                id=run.id,
                args=run.args,
                state=run.state,
                exit_code=run.exit_code,
                seconds=run.seconds(),
            )
            run.personal = ()

    def _execute(self, run: StepRun, args: argparse.Namespace) -> None:
        """The step, interruptible by :meth:`cancel` from the moment ``run.thread`` is set
        until it is cleared (a cancel that comes after the step ended is dropped)."""
        from batch_layer.runner import run_steps
        from pipelines import declared_pipeline, validated

        session = self.spark.newSession()
        session.sparkContext.setJobGroup(run.id, " ".join(run.args), interruptOnCancel=True)
        spec = validated(declared_pipeline(args.pipeline))
        try:
            with run.guard:
                run.thread = threading.get_ident()
            if run.cancel_requested:
                raise StepCancelled()
            run.summary, run.exit_code = run_steps(
                session,
                self.settings,
                args.steps,
                spec,
                args.run_id,
                args.dates,
                args.user,
                args.scope,
            )
        finally:
            with run.guard:
                run.thread = None
                if run.interrupt_sent:
                    _interrupt(threading.get_ident(), None)

    def cancel(self, run: StepRun) -> None:
        """Stop ``run``'s step: its Spark jobs, those it starts next, and its thread."""
        with self._lock:
            if run.finished is not None or run.cancel_requested:
                return
            run.cancel_requested = True
        log_event(_log, "steps.cancel_requested", id=run.id, args=run.args)
        threading.Thread(target=self._stop, args=(run,), name=f"cancel-{run.id}").start()

    def _stop(self, run: StepRun) -> None:
        context = self.spark.sparkContext
        while run.finished is None:
            context.cancelJobGroup(run.id)
            with run.guard:
                if run.thread and not run.interrupt_sent and not importing(run.thread):
                    _interrupt(run.thread, StepCancelled)
                    run.interrupt_sent = True
            time.sleep(_CANCEL_POLL_S)

    def _forget_old(self) -> None:
        """Drop the oldest finished requests beyond ``settings.batch.step_history``."""
        done = sorted((r for r in self.runs.values() if r.finished), key=lambda r: r.finished)
        for run in done[: max(0, len(done) - self.settings.batch.step_history)]:
            del self.runs[run.id]

    def driver_exit_code(self) -> int | None:
        """The Spark driver's exit code once its JVM has ended (a JVM error ends it, e.g.
        ``VirtualMachineError``); None while it runs. Every step would fail without it."""
        process = getattr(self.spark.sparkContext._gateway, "proc", None)
        return None if process is None else process.poll()

    def health(self) -> dict[str, Any]:
        context = self.spark.sparkContext
        runs = list(self.runs.values())
        done = sorted((r for r in runs if r.finished), key=lambda r: r.finished or 0)
        ended = self.driver_exit_code()
        return {
            "status": "ok" if ended is None else "driver_lost",
            "uptime_s": round(time.time() - self.started),
            "spark": {
                "application_id": context.applicationId,
                "master": context.master,
                **({} if ended is None else {"driver_exit_code": ended}),
            },
            "running": [r.view(len(r.log)) for r in runs if not r.finished],
            "finished": self.finished,
            "last": [
                {"args": r.args, "state": r.state, "seconds": r.seconds()} for r in done[-10:]
            ],
        }
