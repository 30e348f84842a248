"""Versioned data contracts (ODCS v3), the single source of the platform's schemas."""

from data_contracts.contract import Contract, ContractError, load_contract

__all__ = ["Contract", "ContractError", "load_contract"]
