"""Secret settings fetched from AWS Secrets Manager at start-up, where no platform injects them.

ECS tasks get their secret ``WAP_*`` variables from the task definition and
MWAA's workers from its startup script; an EMR Serverless job run has no such
hook, so its entry point calls :func:`export_secrets`: ``WAP_SECRETS`` (set
in the application's runtime configuration by Terraform) maps each secret
setting to its secret and JSON key, the same map as Terraform's
``secret_settings`` output::

    WAP_SECRETS='{"WAP_KAFKA__SASL_PASSWORD": {"secret_arn": "arn:...", "json_key": "password"}}'

>>> class Fake:
...     def get_secret_value(self, SecretId):
...         return {"SecretString": '{"password": "s3cret", "keys": {"site": "k"}}'}
>>> refs = {"WAP_KAFKA__SASL_PASSWORD": {"secret_arn": "a", "json_key": "password"},
...         "WAP_COLLECTOR__WRITE_KEYS": {"secret_arn": "a", "json_key": "keys"}}
>>> env = {"WAP_SECRETS": json.dumps(refs)}
>>> export_secrets(env, client=Fake())
['WAP_COLLECTOR__WRITE_KEYS', 'WAP_KAFKA__SASL_PASSWORD']
>>> env["WAP_KAFKA__SASL_PASSWORD"], env["WAP_COLLECTOR__WRITE_KEYS"]
('s3cret', '{"site": "k"}')
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

__all__ = ["export_secrets"]


def export_secrets(env: MutableMapping[str, str], client: Any = None) -> list[str]:
    """Set each secret setting ``WAP_SECRETS`` names into ``env`` (each secret read once);
    return the names set. A value that is JSON (a map of keys) is written as JSON."""
    wanted = json.loads(env.get("WAP_SECRETS") or "{}")
    if not wanted:
        return []
    if client is None:
        import boto3  # on the cluster's Python environment (platformctl package)

        client = boto3.client("secretsmanager")
    secrets: dict[str, dict[str, Any]] = {}
    for name, ref in sorted(wanted.items()):
        arn = ref["secret_arn"]
        if arn not in secrets:
            secrets[arn] = json.loads(client.get_secret_value(SecretId=arn)["SecretString"])
        value = secrets[arn][ref["json_key"]]
        env[name] = value if isinstance(value, str) else json.dumps(value)
    return sorted(wanted)
