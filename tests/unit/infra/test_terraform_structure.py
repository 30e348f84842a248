"""Every .tf file of infra/terraform parses and follows the project's rules.

There is no terraform binary here, so these checks stand in for
``terraform validate`` where they can: variables declared and used, module
calls passing exactly what a module declares, pinned providers, the
standard tags on every environment's AWS provider.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import hcl2
import pytest

REQUIRED_TAGS = {"project", "environment", "owner", "cost-center", "managed-by"}
_VAR_USE = re.compile(r"\bvar\.([a-z_][a-z0-9_]*)")


def _sources(directory: Path) -> str:
    files = [*directory.glob("*.tf"), *directory.glob("*.tftpl")]
    return "\n".join(path.read_text() for path in files)


def test_every_tf_file_parses(tf_files):
    assert len(tf_files) > 20
    for path in tf_files:
        with path.open() as handle:
            assert isinstance(hcl2.load(handle), dict), path


def test_every_module_variable_is_declared_described_and_used(
    module_dirs, env_dirs, parse_dir, labelled
):
    for directory in [*module_dirs, *env_dirs]:
        declared = labelled(parse_dir(directory).get("variable", []))
        used = set(_VAR_USE.findall(_sources(directory)))
        assert used - set(declared) == set(), f"{directory}: used but not declared"
        assert set(declared) - used == set(), f"{directory}: declared but never used"
        for name, body in declared.items():
            assert body.get("description"), f"{directory}: variable {name} has no description"
            assert body.get("type"), f"{directory}: variable {name} has no type"


def test_module_calls_pass_exactly_the_declared_variables(
    terraform_root, parse_dir, labelled, unquote
):
    callers = [terraform_root / "modules" / "platform", *(terraform_root / "envs").iterdir()]
    calls = 0
    for caller in callers:
        for name, call in labelled(parse_dir(caller).get("module", [])).items():
            module_dir = (caller / unquote(call["source"])).resolve()
            declared = labelled(parse_dir(module_dir).get("variable", []))
            required = {var for var, body in declared.items() if "default" not in body}
            passed = {key for key in call if key not in {"source", "depends_on"}}
            passed -= {key for key in call if key.startswith("__")}
            assert passed - set(declared) == set(), f"{caller} module {name}: unknown arguments"
            assert required - passed == set(), f"{caller} module {name}: missing arguments"
            calls += 1
    assert calls >= 8


def test_every_module_and_environment_has_described_outputs(
    module_dirs, env_dirs, parse_dir, labelled
):
    for directory in [*module_dirs, *env_dirs]:
        outputs = labelled(parse_dir(directory).get("output", []))
        assert outputs, f"{directory} has no outputs"
        for name, body in outputs.items():
            assert body.get("description"), f"{directory}: output {name} has no description"


def _bounded(constraint: str) -> bool:
    """A constraint that cannot float to the next major version."""
    return constraint.startswith(("~>", "=")) or "<" in constraint


def test_providers_and_terraform_versions_are_pinned(module_dirs, env_dirs, parse_dir, unquote):
    for directory in [*module_dirs, *env_dirs]:
        blocks = parse_dir(directory).get("terraform", [])
        assert blocks, f"{directory} has no terraform block"
        settings = blocks[0]
        assert _bounded(unquote(settings["required_version"])), directory
        providers = {
            name: spec
            for block in settings.get("required_providers", [])
            for name, spec in block.items()
            if not name.startswith("__")
        }
        assert providers, f"{directory} declares no providers"
        for name, spec in providers.items():
            assert unquote(spec["source"]).count("/") == 1, f"{directory}: {name} source"
            version = unquote(spec["version"])
            assert _bounded(version), f"{directory}: provider {name} version {version!r}"


@pytest.mark.parametrize("constraint", [">= 5.0", "", "*"])
def test_an_unbounded_version_constraint_is_refused(constraint):
    assert not _bounded(constraint)


def test_environments_tag_everything_through_default_tags(env_dirs, parse_dir, labelled, unquote):
    for directory in env_dirs:
        providers = labelled(parse_dir(directory)["provider"])
        tags = providers["aws"]["default_tags"][0]["tags"]
        keys = {unquote(key) for key in tags if not key.startswith("__")}
        assert keys >= REQUIRED_TAGS, f"{directory}: missing tags {REQUIRED_TAGS - keys}"
        assert unquote(tags['"managed-by"']) == "terraform"


def test_environments_declare_the_same_variables_and_outputs(env_dirs, parse_dir, labelled):
    shapes = {
        directory.name: (
            set(labelled(parse_dir(directory)["variable"])),
            set(labelled(parse_dir(directory)["output"])),
        )
        for directory in env_dirs
    }
    assert set(shapes) == {"dev", "prod"}
    assert shapes["dev"] == shapes["prod"]


def test_example_tfvars_set_every_variable_without_a_default(env_dirs, parse_dir, labelled):
    for directory in env_dirs:
        declared = labelled(parse_dir(directory)["variable"])
        with (directory / "terraform.tfvars").open() as handle:
            values = {name for name in hcl2.load(handle) if not name.startswith("__")}
        values |= set(json.loads((directory / "kafka.auto.tfvars.json").read_text()))
        required = {name for name, body in declared.items() if "default" not in body}
        assert required - values == set(), f"{directory}: tfvars misses {required - values}"
        assert values - set(declared) == set(), f"{directory}: tfvars sets undeclared values"
