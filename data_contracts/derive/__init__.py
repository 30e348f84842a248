"""Everything derived from a contract: validators, Spark schema, expectations, privacy."""

from data_contracts.derive.expectations import expectation_suite
from data_contracts.derive.fast_validator import compile_fast_validator
from data_contracts.derive.json_schema import ValidationFailure, compile_validator, to_json_schema
from data_contracts.derive.privacy import (
    FieldHandling,
    anonymised_fields,
    field_handling,
    hidden_in_sql,
    sql_view,
)
from data_contracts.derive.spark import to_spark_schema
from data_contracts.derive.validate import (
    ExpectationFailure,
    ValidationSummary,
    validate_dataframe,
    validate_dataframes,
    validate_with_gx,
)

__all__ = [
    "ExpectationFailure",
    "FieldHandling",
    "ValidationFailure",
    "ValidationSummary",
    "anonymised_fields",
    "compile_fast_validator",
    "compile_validator",
    "expectation_suite",
    "field_handling",
    "hidden_in_sql",
    "sql_view",
    "to_json_schema",
    "to_spark_schema",
    "validate_dataframe",
    "validate_dataframes",
    "validate_with_gx",
]
