"""Every declared pipeline, found in ``pipelines/declared/``, checked before anything runs.

A declaration is one module of :mod:`pipelines.declared` holding ``PIPELINE``, a
:class:`~pipelines.spec.PipelineSpec`; nothing else lists it. Importing this
module finds them all and refuses, with a message naming the declaration and
the fix, what would half-deploy: two pipelines with one name, one topic or one
view, a contract that does not exist at the declared major version. What needs
the contract's and the views' contents (a view no module defines, a contract
whose topic is another one) is checked by :func:`validate_all`, and what the
settings resolve (topics after overrides and defaults, the tables named after
them, the collector's write keys) by :func:`check_deployment`; ``platformctl
up`` runs both before it starts any process.

>>> {"checkouts", "web_events"} <= {spec.name for spec in PIPELINES}
True
>>> pipeline("nope")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
KeyError: "No pipeline 'nope'; the pipelines are: ...checkouts, ...web_events... A pipeline is...
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING

from pipelines import declared
from pipelines.derived import DerivedSpec
from pipelines.derived_checks import check_derived, derived_problems
from pipelines.spec import Collector, PipelineSpec, topic_table_name
from pipelines.teams import team_names

if TYPE_CHECKING:
    from core.settings import Settings
    from views.spec import ViewSpec

__all__ = [
    "CONTRACTS_ROOT",
    "DERIVED",
    "PIPELINES",
    "DeclarationError",
    "check_deployment",
    "check_pipelines",
    "collector_pipeline",
    "collector_routes",
    "declared_pipeline",
    "declared_views",
    "derived_pipeline",
    "discover",
    "pipeline",
    "pipeline_of_view",
    "validate_all",
    "validated",
]

CONTRACTS_ROOT = files("pipelines").parent / "data_contracts"
"""Where contracts live: ``<contract>/v<major>.odcs.yaml`` (beside this package, in the
source tree, in site-packages or in the zipped wheel a cluster job runs from)."""


class DeclarationError(ValueError):
    """A pipeline declaration that cannot be deployed as it stands."""


def discover(package=declared) -> tuple[PipelineSpec | DerivedSpec, ...]:
    """The ``PIPELINE`` of every module of ``package``, in module-name order: a pipeline
    over a topic (:class:`PipelineSpec`) or over other pipelines (:class:`DerivedSpec`)."""
    found = []
    for module_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        spec = getattr(module, "PIPELINE", None)
        if not isinstance(spec, PipelineSpec | DerivedSpec):
            raise DeclarationError(
                f"{module.__name__} declares no pipeline: a module of pipelines/declared/ "
                "holds PIPELINE = PipelineSpec(...) or DerivedSpec(...) "
                "(docs/adding-a-pipeline.md)."
            )
        found.append(spec)
    return tuple(found)


def _claimed_twice(claims: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for thing, pipeline_name in claims:
        owners.setdefault(thing, []).append(pipeline_name)
    return {thing: names for thing, names in owners.items() if len(names) > 1}


def check_pipelines(
    pipelines: tuple[PipelineSpec, ...], contracts_root: Traversable = CONTRACTS_ROOT
) -> tuple[PipelineSpec, ...]:
    """``pipelines``, once names, topics and views are each claimed once and every contract
    exists at its major version. Reads no file but the contracts' names."""
    problems = []
    for name, owners in _claimed_twice((s.name, s.name) for s in pipelines).items():
        problems.append(f"pipeline name {name!r} is declared {len(owners)} times: rename one")
    for topic, owners in _claimed_twice(
        (s.topic or "<collector>", s.name) for s in pipelines
    ).items():
        where = "the collector's topic" if topic == "<collector>" else f"topic {topic!r}"
        problems.append(
            f"{where} is claimed by pipelines {', '.join(owners)}: a topic belongs to one "
            "pipeline (give each its own topic=...)"
        )
    collectors = [s for s in pipelines if isinstance(s.arrival, Collector)]
    defaults = [s.name for s in collectors if s.arrival.default]
    if len(defaults) > 1:
        problems.append(
            f"pipelines {', '.join(defaults)} each take every collector source "
            "(arrival=Collector()): one pipeline is the collector's default; name the "
            "sources of the others, arrival=Collector(sources=('<source id>',))"
        )
    for source, owners in _claimed_twice(
        (source, s.name) for s in collectors for source in s.arrival.sources
    ).items():
        problems.append(
            f"collector source {source!r} is named by pipelines {', '.join(owners)}: a "
            "source's events go to one pipeline"
        )
    for view, owners in _claimed_twice((v, s.name) for s in pipelines for v in s.views).items():
        problems.append(
            f"view {view!r} is declared by pipelines {', '.join(owners)}: gold/<view> and the "
            "Cassandra tables are named after the view, so keep each view in one pipeline"
        )
    problems.extend(_unknown_teams(pipelines))
    for spec in pipelines:
        file = f"{spec.contract}/v{spec.contract_major}.odcs.yaml"
        if not contracts_root.joinpath(file).is_file():
            problems.append(
                f"pipeline {spec.name!r} names contract {spec.contract} v{spec.contract_major}, "
                f"but data_contracts/{file} does not exist: add it or fix "
                "contract=/contract_major="
            )
    if problems:
        raise DeclarationError("Pipeline declarations refused:\n- " + "\n- ".join(problems))
    return pipelines


def _unknown_teams(pipelines: Iterable[PipelineSpec]) -> list[str]:
    known = team_names()
    problems = []
    for spec in pipelines:
        for role, team in (("owner", spec.owner), *(("readers", r) for r in spec.readers)):
            if team not in known:
                problems.append(
                    f"pipeline {spec.name!r} names team {team!r} ({role}=), which is not "
                    f"declared in pipelines/teams.py (teams: {', '.join(sorted(known))}): "
                    "declare it there or fix the name"
                )
    return problems


def check_deployment(
    pipelines: tuple[PipelineSpec, ...], settings: Settings
) -> tuple[PipelineSpec, ...]:
    """``pipelines``, once what they use under ``settings`` is each one's own: the topic they
    read after ``kafka.topics`` overrides and the collector's default (``kafka.events_topic``),
    the bronze and silver tables named after it, and the collector's sources and write keys
    (a declared source without a key gets no event; a key shared by two sources goes to the
    last one only)."""
    problems = []
    names = {spec.name for spec in pipelines}
    for name in sorted(set(settings.kafka.topics) - names):
        problems.append(
            f"kafka.topics names {name!r}, which is no pipeline (the pipelines are: "
            f"{', '.join(sorted(names))}): fix WAP_KAFKA__TOPICS"
        )
    topics = {spec.name: spec.topic_of(settings) for spec in pipelines}
    for topic, owners in _claimed_twice((t, name) for name, t in topics.items()).items():
        problems.append(
            f"pipelines {', '.join(owners)} all read topic {topic!r} (their topic=, "
            "kafka.topics or the collector's kafka.events_topic): a topic belongs to one "
            "pipeline, or they would resume from each other's offsets"
        )
    tables = ((topic_table_name(t), f"{name} ({t})") for name, t in topics.items())
    for table, owners in _claimed_twice(tables).items():
        if len({owner.split(" ", 1)[1] for owner in owners}) > 1:
            problems.append(
                f"pipelines {', '.join(owners)} would share bronze/{table} and silver/{table} "
                "(a table is named after its topic, dots and dashes as underscores): rename "
                "one topic"
            )
    keys = settings.collector.write_keys
    for spec in pipelines:
        if isinstance(spec.arrival, Collector):
            for source in spec.arrival.sources:
                if source not in keys:
                    problems.append(
                        f"pipeline {spec.name!r} takes collector source {source!r}, which "
                        "has no write key: add it to collector.write_keys "
                        "(WAP_COLLECTOR__WRITE_KEYS, kept where the secrets are)"
                    )
    for _, sources in _claimed_twice(
        (key.get_secret_value(), source) for source, key in keys.items()
    ).items():
        problems.append(
            f"collector sources {', '.join(sources)} have the same write key: a key names "
            "one source (give each its own)"
        )
    if problems:
        raise DeclarationError("Pipeline deployment refused:\n- " + "\n- ".join(problems))
    return pipelines


def validate_all(
    pipelines: tuple[PipelineSpec, ...] | None = None, settings: Settings | None = None
) -> tuple[PipelineSpec, ...]:
    """Every pipeline, once its views resolve, its reconciliations sum counts, its identity
    fields are contract fields and its contract's declared topic is the pipeline's (and,
    ``pipelines`` not given, every derived pipeline's transformation reads what its
    inputs hold, and the personal fields it reads are declared); with
    ``settings``, once what they use there is each one's own (:func:`check_deployment`)."""
    from data_contracts.contract import ContractError, load_contract

    problems = []
    if settings is not None:
        try:
            check_deployment(PIPELINES if pipelines is None else pipelines, settings)
        except DeclarationError as error:
            problems.extend(str(error).split("\n- ")[1:])
    for spec in PIPELINES if pipelines is None else pipelines:
        try:
            spec.validate()
        except (KeyError, ValueError) as error:
            problems.append(f"pipeline {spec.name!r}: {str(error).strip(chr(34))}")
            continue
        contract = load_contract(spec.contract, spec.contract_major)
        fields = {p.name for p in contract.properties}
        missing = [f for f in spec.identity if f not in fields]
        if missing:
            problems.append(
                f"pipeline {spec.name!r}: identity fields {missing} are not fields of "
                f"{contract.ref} (fields: {', '.join(sorted(fields))})"
            )
        try:
            declared_topic = contract.topic
        except ContractError:
            declared_topic = None
        if spec.topic is not None and declared_topic and declared_topic != spec.topic:
            problems.append(
                f"pipeline {spec.name!r} reads topic {spec.topic!r} but its contract "
                f"{contract.ref} says its records are on {declared_topic!r}: make them agree"
            )
    if pipelines is None:
        problems.extend(derived_problems(DERIVED, PIPELINES))
    if problems:
        raise DeclarationError("Pipeline declarations refused:\n- " + "\n- ".join(problems))
    return PIPELINES if pipelines is None else pipelines


_DECLARED = discover()
PIPELINES: tuple[PipelineSpec, ...] = check_pipelines(
    tuple(s for s in _DECLARED if isinstance(s, PipelineSpec))
)


def _checked_derived() -> tuple[DerivedSpec, ...]:
    derived = tuple(s for s in _DECLARED if isinstance(s, DerivedSpec))
    ordered, problems = check_derived(derived, PIPELINES, CONTRACTS_ROOT)
    if problems:
        raise DeclarationError("Derived pipeline declarations refused:\n- " + "\n- ".join(problems))
    return ordered


DERIVED: tuple[DerivedSpec, ...] = _checked_derived()
"""The derived pipelines, in an order where each comes after its inputs."""


def pipeline(name: str) -> PipelineSpec:
    """The pipeline called ``name``."""
    for spec in PIPELINES:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in PIPELINES)
    raise KeyError(
        f"No pipeline {name!r}; the pipelines are: {known}. A pipeline is declared by a "
        "module of pipelines/declared/ (docs/adding-a-pipeline.md)."
    )


def derived_pipeline(name: str) -> DerivedSpec:
    """The derived pipeline called ``name``."""
    for spec in DERIVED:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in DERIVED) or "none"
    raise KeyError(
        f"No derived pipeline {name!r}; the derived pipelines are: {known} "
        '(docs/adding-a-pipeline.md, "A pipeline over pipelines").'
    )


def declared_pipeline(name: str) -> PipelineSpec | DerivedSpec:
    """The pipeline or derived pipeline called ``name``."""
    for spec in (*PIPELINES, *DERIVED):
        if spec.name == name:
            return spec
    known = ", ".join(sorted(s.name for s in (*PIPELINES, *DERIVED)))
    raise KeyError(f"No pipeline {name!r}; the pipelines are: {known}.")


def validated(spec: PipelineSpec | DerivedSpec) -> PipelineSpec | DerivedSpec:
    """``spec``, once what its contents need holds: a pipeline's views and reconciliations
    (:meth:`PipelineSpec.validate`), a derived pipeline's transformation reading what its
    inputs hold and declaring the personal fields it reads."""
    if isinstance(spec, PipelineSpec):
        return spec.validate()
    inputs = tuple(d for d in DERIVED if d.name in spec.input_names)
    problems = derived_problems((*inputs, spec), PIPELINES)
    if problems:
        raise DeclarationError("Derived pipeline refused:\n- " + "\n- ".join(problems))
    return spec


def collector_pipeline() -> PipelineSpec:
    """The collector's default pipeline (``arrival=Collector()``, naming no source): where
    every source no other pipeline names writes.

    >>> collector_pipeline().name
    'web_events'
    """
    found = [s for s in PIPELINES if isinstance(s.arrival, Collector) and s.arrival.default]
    if not found:
        raise DeclarationError(
            "no pipeline is the collector's default (arrival=Collector() naming no source): "
            "declare one, or route every source with Collector(sources=(...))"
        )
    return found[0]


def collector_routes(
    sources: Iterable[str], pipelines: tuple[PipelineSpec, ...] | None = None
) -> dict[str, PipelineSpec]:
    """Collector source id -> the pipeline its events go to (``Collector.sources``, else the
    default pipeline), for every one of ``sources``; refused when one goes nowhere.

    >>> {source: spec.name for source, spec in collector_routes(["web"]).items()}
    {'web': 'web_events'}
    """
    declared = PIPELINES if pipelines is None else pipelines
    collectors = [s for s in declared if isinstance(s.arrival, Collector)]
    named = {source: spec for spec in collectors for source in spec.arrival.sources}
    default = next((s for s in collectors if s.arrival.default), None)
    routes, lost = {}, []
    for source in sources:
        spec = named.get(source, default)
        if spec is None:
            lost.append(source)
        else:
            routes[source] = spec
    if lost:
        raise DeclarationError(
            f"collector sources {lost} (collector.write_keys) go to no pipeline: name each in "
            "a pipeline's arrival=Collector(sources=(...)), or declare a default pipeline "
            "(arrival=Collector())"
        )
    return routes


def declared_views() -> tuple[ViewSpec, ...]:
    """Every view of every declared pipeline, in declaration order: the tables to create."""
    return tuple(view for spec in PIPELINES for view in spec.view_specs)


def pipeline_of_view(view: str) -> PipelineSpec:
    """The pipeline that declares ``view``."""
    for spec in PIPELINES:
        if view in spec.views:
            return spec
    raise KeyError(f"No pipeline declares view {view!r}.")
