"""``python -m data_contracts check|publish``: guard the published contract versions."""

from __future__ import annotations

import argparse
import sys

from data_contracts.compat import check_compatibility, publish
from data_contracts.contract import CONTRACTS_DIR, ContractError, load_contract


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="data_contracts", description=__doc__)
    parser.add_argument("command", choices=["check", "publish"])
    args = parser.parse_args(argv)
    status = 0
    for path in sorted(CONTRACTS_DIR.glob("*/v*.odcs.yaml")):
        name, major = path.parent.name, int(path.name.split(".")[0][1:])
        try:
            contract = load_contract(name, major)
            if args.command == "check":
                check_compatibility(contract)
                print(f"ok        {contract.ref}")
            else:
                print(f"published {contract.ref} -> {publish(contract)}")
        except ContractError as exc:
            print(f"BREAKING  {path}: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
