"""Every translated expectation of one or more suites in one Spark query.

Per table, one aggregation holds every count and aggregate the rules need
(``count_if`` per row-level rule, ``min`` / ``mean`` / ``count(distinct)`` per
aggregate rule, shared where two rules need the same one), and each
uniqueness rule one grouping of its columns; the tables' one-row results are
collected at once (a union of their rows as JSON text). Where a map expectation found
unexpected rows, their values are fetched with the query GX runs for them (its
first :data:`~data_contracts.derive.one_pass.EXAMPLES` rows), so a report names
the same values.

A rule whose aggregates Spark cannot analyse on the table (a type GX would
take and Spark not as written here) is dropped before the query and left to
GX, with the rest still counted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from data_contracts.derive.one_pass import Rule, translate

if TYPE_CHECKING:
    from great_expectations.expectations import Expectation
    from pyspark.sql import Column, DataFrame

__all__ = ["Counted", "count_suites", "one_row_values"]


@dataclass(frozen=True)
class Counted:
    """One suite's results: GX-shaped results by expectation index for what was counted
    here, and the indexes left to GX."""

    results: dict[int, dict[str, Any]]
    left_to_gx: tuple[int, ...]


def count_suites(tables: Sequence[tuple[DataFrame, Sequence[Expectation]]]) -> list[Counted]:
    """Judge every expectation of each ``(table, expectations)`` pair that a rule translates,
    in one Spark query over all the tables; examples of failed map expectations after it.

    Raises what Spark raises when the query fails at run time: the caller then asks GX.
    """
    plans = [_plan(df, expectations, f"t{n}_") for n, (df, expectations) in enumerate(tables)]
    values = one_row_values([frame for plan in plans for frame in plan.frames()])
    counted = []
    for plan in plans:
        results = {}
        for index, rule in plan.rules.items():
            verdict = rule.judge({key: values.get(name) for key, name in plan.names.items()})
            if rule.examples is not None:
                found = verdict["result"]["unexpected_count"]
                verdict["result"]["partial_unexpected_list"] = (
                    _examples(plan.df, rule) if found else []
                )
            results[index] = verdict
        counted.append(Counted(results, plan.left))
    return counted


def one_row_values(frames: Sequence[DataFrame]) -> dict[str, Any]:
    """The columns of one-row DataFrames (distinct names), collected in one Spark action: each
    row as JSON text (its numbers keep their kind), all in one union, which costs a job per
    shuffle and one to collect, where joining them would broadcast each. A null is absent."""
    import json
    from functools import reduce

    from pyspark.sql import functions as F

    values: dict[str, Any] = {}
    if frames:
        texts = [f.select(F.to_json(F.struct(*f.columns)).alias("v")) for f in frames]
        for row in reduce(lambda a, b: a.unionAll(b), texts).collect():
            values |= json.loads(row["v"])
    return values


@dataclass
class _Plan:
    df: DataFrame
    rules: dict[int, Rule]
    left: tuple[int, ...]
    names: dict[str, str]
    """Aggregate key -> its column in the joined row."""

    def frames(self) -> list[DataFrame]:
        """The table's one-row results: the aggregation, then one per uniqueness grouping."""
        from pyspark.sql import functions as F

        needs: dict[str, Column] = {}
        groups: dict[str, tuple[Column | None, list[Column]]] = {}
        for rule in self.rules.values():
            needs |= rule.needs
            groups |= rule.groups
        frames = []
        if needs:
            frames.append(
                self.df.agg(*[column.alias(self.names[k]) for k, column in needs.items()])
            )
        for key, (scope, columns) in groups.items():
            data = self.df if scope is None else self.df.where(scope)
            keyed = data.select(*[c.alias(f"k{i}") for i, c in enumerate(columns)])
            counts = keyed.groupBy(*keyed.columns).agg(F.count(F.lit(1)).alias("n"))
            repeated = F.sum(F.when(F.col("n") > 1, F.col("n")).otherwise(0))
            frames.append(counts.agg(F.coalesce(repeated, F.lit(0)).alias(self.names[key])))
        return frames


def _plan(df: DataFrame, expectations: Sequence[Expectation], prefix: str) -> _Plan:
    """The rules of ``expectations`` over ``df``; those Spark cannot analyse left to GX."""
    rules: dict[int, Rule] = {}
    left: list[int] = []
    for index, expectation in enumerate(expectations):
        rule = translate(expectation, df.schema)
        if rule is None:
            left.append(index)
        else:
            rules[index] = rule
    if not _analyses(df, list(rules.values())):  # find which, one by one
        left += [index for index, rule in rules.items() if not _analyses(df, [rule])]
        rules = {index: rule for index, rule in rules.items() if index not in left}
    keys = [k for rule in rules.values() for k in (*rule.needs, *rule.groups)]
    names = {key: f"{prefix}{n}" for n, key in enumerate(dict.fromkeys(keys))}
    return _Plan(df, rules, tuple(sorted(left)), names)


def _analyses(df: DataFrame, rules: list[Rule]) -> bool:
    """Spark resolves the rules' aggregates and groupings on ``df`` (analysis only: no job)."""
    from pyspark.errors import AnalysisException

    needs = [column for rule in rules for column in rule.needs.values()]
    try:
        if needs:
            df.agg(*needs).schema  # noqa: B018 (analysed as it is built)
        for rule in rules:
            for scope, columns in rule.groups.values():
                (df if scope is None else df.where(scope)).groupBy(*columns).count().schema  # noqa: B018
    except AnalysisException:
        return False
    return True


def _examples(df: DataFrame, rule: Rule) -> list[Any]:
    """The first unexpected values, as GX lists them (dicts for a multicolumn rule)."""
    assert rule.examples is not None
    rows = rule.examples(df).collect()
    if rule.multicolumn:
        return [row.asDict() for row in rows]
    return [row[0] for row in rows]
