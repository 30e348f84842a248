"""Everything derived from a contract: validators, Spark schema, expectations."""

from data_contracts.derive.expectations import (
    ExpectationFailure,
    ValidationSummary,
    expectation_suite,
    validate_dataframe,
)
from data_contracts.derive.fast_validator import compile_fast_validator
from data_contracts.derive.json_schema import ValidationFailure, compile_validator, to_json_schema
from data_contracts.derive.spark import to_spark_schema

__all__ = [
    "ExpectationFailure",
    "ValidationFailure",
    "ValidationSummary",
    "compile_fast_validator",
    "compile_validator",
    "expectation_suite",
    "to_json_schema",
    "to_spark_schema",
    "validate_dataframe",
]
