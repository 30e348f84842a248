"""The transformations of derived pipelines: one module each, a pure function of its inputs.

A module of this package, named like its pipeline (``pipelines/declared/<name>.py``
declares it with :class:`pipelines.DerivedSpec`), holds:

- ``READS``: input pipeline -> the columns it reads, by dotted path
  (``"context.campaign"``). The batch layer hands the transformation only
  those (:func:`derived.inputs.project`): what it reads is an allow-list,
  checked against the inputs' contracts, and a personal field among them must
  be declared by the output's contract (``pipelines/derived_checks.py``);
- ``build(inputs) -> DataFrame``: the output's rows from the inputs' frames
  (input name -> DataFrame), the same in any run. It is given every day an
  output day reads (``Input.reach_days``) and may return rows of other days:
  the batch layer keeps those of the days it rebuilds.

Like :mod:`views`, importable without Spark: a module imports PySpark inside
``build``.
"""

__all__: list[str] = []
