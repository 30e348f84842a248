"""The production deployment on AWS, and the Python that keeps it honest.

The Terraform lives in ``modules/`` and ``envs/``. This package holds what
ties it to the project's own definitions:

- :mod:`infra.terraform.cql` reads the project's CREATE TABLE statements
  into Amazon Keyspaces table definitions;
- :mod:`infra.terraform.generate` writes the generated ``*.tf.json`` files
  (Keyspaces tables, Kafka topics) and checks the committed ones for drift;
- :mod:`infra.terraform.settings_env` turns ``terraform output -json`` into
  the ``WAP_*`` environment variables the settings object reads.
"""

__all__: list[str] = []
