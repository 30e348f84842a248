"""The checks a derived pipeline's declaration passes before anything runs it.

At import (:func:`check_derived`, reading no file but the contracts' and the
transformations' names): every name is one pipeline's, every input is a
declared pipeline, no derived pipeline reaches itself through its inputs, its
teams are declared, its contract and its transformation module exist. The
derived pipelines come back in an order where each follows its inputs.

At ``validate_all()`` and ``platformctl up`` (:func:`derived_problems`, loading
the contracts and the transformation modules, still without Spark): the
transformation reads (``READS``) exactly its inputs, only columns they hold,
and no personal field of theirs that its own contract does not declare in
its ``personalInputs`` custom property; the declared ``identity`` fields are
``restricted`` fields of the output's contract and the ``day`` column is one
of its dates.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable, Mapping
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

from pipelines.teams import team_names

if TYPE_CHECKING:
    from data_contracts import Contract
    from pipelines.derived import DerivedSpec
    from pipelines.spec import PipelineSpec

__all__ = [
    "PERSONAL_INPUTS",
    "SILVER_EXTRA_COLUMNS",
    "check_derived",
    "derived_problems",
    "personal_fields",
    "reads_personal",
]

SILVER_EXTRA_COLUMNS = ("event_time", "event_date", "partition", "offset")
"""Columns silver holds beside the contract's fields (its ``payload``, the whole event as
received, is not offered to a transformation: its personal fields are not declared)."""

PERSONAL_INPUTS = "personalInputs"
"""The output contract's custom property listing the inputs' personal fields the
transformation reads, as ``<pipeline>.<field>``."""


class _Refused(ValueError):
    pass


def check_derived(
    derived: tuple[DerivedSpec, ...],
    pipelines: tuple[PipelineSpec, ...],
    contracts_root: Traversable,
) -> tuple[tuple[DerivedSpec, ...], list[str]]:
    """``derived``, each after its inputs, and what keeps names, inputs, teams, contracts
    and transformation modules from being as the module says (empty: nothing)."""
    problems: list[str] = []
    names = [s.name for s in pipelines] + [d.name for d in derived]
    views = {v for s in pipelines for v in s.views}
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"pipeline name {name!r} is declared {names.count(name)} times: rename one")
    for spec in derived:
        if spec.name in views:
            problems.append(
                f"derived pipeline {spec.name!r} has the name of a view (SQL serves both "
                "by name): rename it"
            )
        for missing in [n for n in spec.input_names if n not in names]:
            problems.append(
                f"derived pipeline {spec.name!r} reads {missing!r}, which is no declared "
                f"pipeline (pipelines: {', '.join(sorted(names))}): declare it, or fix "
                f"Input({missing!r}) in pipelines/declared/{spec.name}.py"
            )
        problems.extend(_team_problems(spec))
        file = f"{spec.contract}/v{spec.contract_major}.odcs.yaml"
        if not contracts_root.joinpath(file).is_file():
            problems.append(
                f"derived pipeline {spec.name!r} names contract {spec.contract} "
                f"v{spec.contract_major}, but data_contracts/{file} does not exist: add it "
                "or fix contract=/contract_major="
            )
        if importlib.util.find_spec(f"derived.{spec.transform}") is None:
            problems.append(
                f"derived pipeline {spec.name!r} is built by derived/{spec.transform}.py, "
                "which does not exist: add the module (READS and build) or fix transform="
            )
    ordered, cycles = _in_input_order(derived)
    return ordered, [*problems, *cycles]


def _team_problems(spec: DerivedSpec) -> list[str]:
    known = team_names()
    return [
        f"derived pipeline {spec.name!r} names team {team!r} ({role}=), which is not declared "
        f"in pipelines/teams.py (teams: {', '.join(sorted(known))})"
        for role, team in (("owner", spec.owner), *(("readers", r) for r in spec.readers))
        if team not in known
    ]


def _in_input_order(derived: tuple[DerivedSpec, ...]) -> tuple[tuple[DerivedSpec, ...], list[str]]:
    """The derived pipelines, each after the derived pipelines it reads; the cycles found."""
    by_name = {d.name: d for d in derived}
    ordered: list[DerivedSpec] = []
    state: dict[str, str] = {}
    cycles: list[str] = []

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            loop = [*path[path.index(name) :], name]
            cycles.append(
                f"derived pipelines read each other in a circle: {' -> '.join(loop)}: a "
                "derived pipeline cannot depend on its own output; remove one Input(...)"
            )
            return
        state[name] = "visiting"
        for upstream in by_name[name].input_names:
            if upstream in by_name:
                visit(upstream, [*path, name])
        state[name] = "done"
        ordered.append(by_name[name])

    for spec in derived:
        visit(spec.name, [])
    return tuple(ordered), cycles


def personal_fields(contract: Contract, identity: Iterable[str]) -> frozenset[str]:
    """A table's personal fields, by dotted path: its ``identity`` and its contract's
    ``restricted`` fields (nested ones included)."""
    from data_contracts.derive.privacy import field_handling

    restricted = {path for path, h in field_handling(contract).items() if h.restricted}
    return frozenset({*identity, *restricted})


def _columns(contract: Contract, silver: bool) -> frozenset[str]:
    """Every column and nested field of the table, by dotted path."""
    paths: list[str] = []
    stack = [("", p) for p in contract.properties]
    while stack:
        prefix, prop = stack.pop()
        path = f"{prefix}{prop.name}"
        paths.append(path)
        stack.extend((f"{path}.", child) for child in prop.properties or [])
    return frozenset({*paths, *SILVER_EXTRA_COLUMNS}) if silver else frozenset(paths)


def reads_personal(path: str, personal: Iterable[str]) -> list[str]:
    """The personal fields that reading ``path`` reads: itself, or those inside it.

    >>> reads_personal("context", ["userId", "context.ip"])
    ['context.ip']
    """
    return sorted(p for p in personal if p == path or p.startswith(f"{path}."))


def derived_problems(
    derived: Iterable[DerivedSpec], pipelines: Iterable[PipelineSpec]
) -> list[str]:
    """What keeps each derived pipeline from running as declared (empty: nothing)."""
    tables: dict[str, tuple[Contract, bool, tuple[str, ...]]] = {
        s.name: (s.load_contract(), True, s.identity) for s in pipelines
    }
    problems: list[str] = []
    for spec in derived:
        contract = spec.load_contract()
        tables[spec.name] = (contract, False, spec.identity)
        try:
            problems.extend(_problems_of(spec, contract, tables))
        except _Refused as refused:
            problems.append(str(refused))
    return problems


def _problems_of(
    spec: DerivedSpec, contract: Contract, tables: Mapping[str, tuple[Contract, bool, Any]]
) -> list[str]:
    where = f"derived pipeline {spec.name!r}"
    module = importlib.import_module(f"derived.{spec.transform}")
    reads = getattr(module, "READS", None)
    if not isinstance(reads, Mapping) or not callable(getattr(module, "build", None)):
        raise _Refused(
            f"{where}: derived/{spec.transform}.py must hold READS (input -> the columns it "
            "reads) and build(inputs) -> DataFrame"
        )
    problems = []
    if set(reads) != set(spec.input_names):
        problems.append(
            f"{where}: derived/{spec.transform}.py reads {sorted(reads)} but the declaration's "
            f"inputs are {sorted(spec.input_names)}: make READS and inputs= name the same "
            "pipelines"
        )
    declared = set(_custom(contract, PERSONAL_INPUTS))
    fields = {str(p.name): p for p in contract.properties}
    for name, columns in reads.items():
        if name not in tables:
            continue
        input_contract, silver, identity = tables[name]
        unknown = sorted(set(columns) - _columns(input_contract, silver))
        if unknown:
            problems.append(
                f"{where} reads {unknown} of {name!r}, which holds no such columns (it holds "
                f"{', '.join(sorted(_columns(input_contract, silver)))})"
            )
        personal = personal_fields(input_contract, identity)
        read = sorted({p for column in columns for p in reads_personal(column, personal)})
        for personal_field in read:
            if f"{name}.{personal_field}" not in declared:
                problems.append(
                    f"{where} reads {name}.{personal_field}, a personal field its contract "
                    f"{contract.ref} does not declare: list it in the contract's "
                    f"customProperties {PERSONAL_INPUTS} (and say why), or stop reading it"
                )
    for field in spec.identity:
        prop = fields.get(field)
        if prop is None or prop.classification != "restricted":
            problems.append(
                f"{where}: identity field {field!r} must be a field of {contract.ref} "
                "classified restricted (SQL hides it, forget finds the person by it)"
            )
    day = fields.get(spec.day)
    if day is None or day.logicalType != "date":
        problems.append(
            f"{where}: its day column {spec.day!r} must be a date field of {contract.ref} "
            "(logicalType: date): the table is partitioned and rebuilt by it"
        )
    return problems


def _custom(contract: Contract, key: str) -> list[str]:
    from data_contracts.contract import ContractError

    try:
        value = contract.custom_property(key)
    except ContractError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]
