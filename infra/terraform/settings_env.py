"""``terraform output -json`` as the ``WAP_*`` variables the settings object reads.

Every environment output named ``WAP_<SECTION>__<FIELD>`` (or ``WAP_<FIELD>``)
is exactly one setting of :class:`core.settings.Settings`, already rendered the
way pydantic-settings parses it (JSON for lists and maps). Other outputs
(secret ARNs, URLs) are for operators and are ignored here. Secrets are never
outputs: passwords come from Secrets Manager.

::

    terraform -chdir=infra/terraform/envs/prod output -json \\
        | python -m infra.terraform.settings_env > prod.env
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from pydantic.fields import FieldInfo

from core.settings import Settings

__all__ = ["PREFIX", "setting_field", "settings_env"]

PREFIX = "WAP_"


def setting_field(variable: str) -> FieldInfo:
    """The settings field an environment variable sets; ValueError if there is none."""
    if not variable.startswith(PREFIX):
        raise ValueError(f"{variable!r} does not start with {PREFIX!r}.")
    section, _, field = variable[len(PREFIX) :].lower().partition("__")
    fields = Settings.model_fields
    if section not in fields:
        raise ValueError(f"{variable!r}: Settings has no field or section {section!r}.")
    if not field:
        return fields[section]
    section_type = fields[section].annotation
    section_fields = getattr(section_type, "model_fields", {})
    if field not in section_fields:
        raise ValueError(f"{variable!r}: settings section {section!r} has no field {field!r}.")
    return section_fields[field]


def settings_env(outputs: Mapping[str, Any]) -> dict[str, str]:
    """``WAP_*`` name -> value, from ``terraform output -json`` (or plain name -> value)."""
    env = {}
    for name, output in outputs.items():
        if not name.startswith(PREFIX):
            continue
        setting_field(name)
        value = output["value"] if isinstance(output, Mapping) and "value" in output else output
        env[name] = value if isinstance(value, str) else json.dumps(value)
    return env


def main() -> int:
    for name, value in sorted(settings_env(json.load(sys.stdin)).items()):
        print(f"export {name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
