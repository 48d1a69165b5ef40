"""How the API's typed declaration (api/spec.py and beside it) becomes the CRD's schema,
and how offline validation reads that schema (api/openapi.py, api/validation.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openapi_schema_validator import OAS30Validator

from multigpu_operator.api.schema import root_schema, spec_schema
from multigpu_operator.api.spec import Job, JobSpec
from multigpu_operator.api.validation import Problem, validate, with_defaults
from support.server_answers import SERVER_ANSWERS, ddp, names_the_fields

TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "busybox:1.36"}]}}


def nodes(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its dotted path; list items as `path[]`."""
    yield path, node
    for key, sub in node.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{key}" if path else key)
    if isinstance(node.get("items"), dict):
        yield from nodes(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from nodes(node["additionalProperties"], f"{path}{{}}")


def test_every_server_default_is_stated_in_its_description() -> None:
    described = [
        (path, node["default"])
        for path, node in nodes(root_schema())
        if "default" in node and node["type"] in ("integer", "string")
    ]
    assert described
    for path, default in described:
        node = dict(nodes(root_schema()))[path]
        # Last, but for the maximum ("Default 3. At most 1000.").
        description = node["description"].removesuffix(f" At most {node.get('maximum')}.")
        assert description.endswith(f" Default {default}."), path


def test_only_declared_fields_are_nullable() -> None:
    # `X | None` in the declaration means "may be omitted"; null must be asked for.
    nullable = {path for path, node in nodes(root_schema()) if node.get("nullable")}
    assert nullable == {
        "spec.shmSize",
        "status.lastFailure.replicaIndex",
        "status.lastFailure.exitCode",
        "status.attempts[].failedPods[].replicaIndex",
        "status.attempts[].failedPods[].exitCode",
    }


def test_python_only_defaults_are_not_server_defaults() -> None:
    # None and () mean "unset" in the typed job; the API server stores nothing for them.
    spec = spec_schema()["properties"]
    assert "default" not in spec["gpuProduct"]
    assert "default" not in spec["modelParallel"]
    assert "default" not in spec["runPolicy"]["properties"]["retryableExitCodes"]
    assert spec["runPolicy"]["default"] == {}


def test_the_schema_is_structural() -> None:
    for path, node in nodes(root_schema()):
        assert not {"$ref", "$defs", "anyOf", "title"} & set(node), path
        if node is not root_schema():
            assert "type" in node, path


def test_every_keyword_of_the_schema_is_checked_offline() -> None:
    # The library checks OpenAPI's keywords; api/validation.py the Kubernetes extensions
    # (CEL rules, unknown fields, sets). A new extension needs its check there.
    used = {key for _, node in nodes(root_schema()) for key in node}
    described = {"default", "description", "format", "nullable"}  # format: by `type`
    assert used - {*OAS30Validator.VALIDATORS, *described} <= _X_KUBERNETES


_X_KUBERNETES = {
    "x-kubernetes-validations",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
}


def test_the_typed_job_has_the_server_defaults() -> None:
    raw = {"mode": "Elastic", "elastic": {"minReplicas": 1, "maxReplicas": 2}, "template": {}}
    stored = with_defaults(spec_schema(), raw)
    job = JobSpec.model_validate(raw)
    assert job.master_port == stored["masterPort"]
    assert job.run_policy.backoff_limit == stored["runPolicy"]["backoffLimit"]
    assert job.gang.on_timeout == stored["gang"]["onTimeout"]
    assert job.elastic is not None
    assert job.elastic.max_restarts == stored["elastic"]["maxRestarts"]


def test_the_typed_job_keeps_the_template_as_written() -> None:
    template = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "x"}]}}
    job = Job.from_object(
        {"metadata": {"name": "j"}, "spec": {"mode": "DataParallel", "template": template}}
    )
    assert job.spec.template == template


def test_shm_size_zero_means_none_in_the_typed_job() -> None:
    assert (
        JobSpec.model_validate({"mode": "DataParallel", "template": {}, "shmSize": "0"}).shm_size
        is None
    )
    assert (
        JobSpec.model_validate({"mode": "DataParallel", "template": {}, "shmSize": None}).shm_size
        is None
    )
    assert JobSpec.model_validate({"mode": "DataParallel", "template": {}}).shm_size == "2Gi"


def test_defaulting_is_the_servers() -> None:
    raw = {
        "mode": "DistributedDataParallel",
        "masterPort": None,
        "gpuProduct": None,
        "template": {"spec": {"containers": [{"name": "t"}], "nodeSelector": None}},
    }
    out = with_defaults(spec_schema(), raw)
    # A null with a default gets the default; without one it is pruned; nulls the
    # schema does not declare (inside the pod spec) are kept, as the server keeps them.
    assert out["masterPort"] == 29500
    assert "gpuProduct" not in out
    assert out["template"]["spec"]["nodeSelector"] is None
    assert out["runPolicy"]["restartPolicy"] == "OnFailure"
    assert raw["masterPort"] is None  # the input is not changed


def test_a_wrong_type_stops_the_cross_field_rules() -> None:
    # As on the API server: a rule would read what the schema does not promise.
    problems = validate({"mode": 5, "template": TEMPLATE})
    assert Problem("spec.mode", "5 is not of type 'string'") in problems
    assert {p.field for p in problems} == {"spec.mode"}
    assert validate({"mode": "DataParallel", "replicas": "2", "template": TEMPLATE}) == [
        Problem("spec.replicas", "'2' is not of type 'integer'")
    ]


def test_errors_inside_lists_name_the_item() -> None:
    bad = {"spec": {"containers": [{"name": "a"}, None]}}
    problems = validate({"mode": "DataParallel", "template": bad})
    assert {p.field for p in problems} == {"spec.template.spec.containers[1]"}


@pytest.mark.parametrize(
    ("raw", "lines"), [c[1:] for c in SERVER_ANSWERS], ids=[c[0] for c in SERVER_ANSWERS]
)
def test_validate_rejects_what_the_api_server_rejects(
    raw: dict[str, Any], lines: list[str]
) -> None:
    # tests/integration/test_api_validation.py holds the same table against a real server.
    problems = validate(raw)
    assert problems
    assert names_the_fields([p.field for p in problems], lines), problems


def test_null_map_values_are_pruned_and_floats_stored_as_the_server_does() -> None:
    raw = ddp(
        gpusPerReplica=2.0,
        template={"metadata": {"labels": {"a": None, "b": "x"}}, "spec": {"containers": [{}]}},
    )
    stored = with_defaults(spec_schema(), raw)
    assert stored["gpusPerReplica"] == 2
    assert isinstance(stored["gpusPerReplica"], int)
    assert stored["template"]["metadata"]["labels"] == {"b": "x"}


@pytest.mark.parametrize(
    ("value", "stored"),
    [(7, 7), (2.0, 2), (2.5, 2.5), (2**64, 18446744073709552000), (1e21, 1e21), (True, True)],
)
def test_numbers_read_back_as_the_api_server_writes_them(value: Any, stored: Any) -> None:
    # A number beyond int64 is a float64 to the server, written back in its shortest digits.
    out = with_defaults({}, value)
    assert (out, type(out)) == (stored, type(stored))


@pytest.mark.parametrize("name", ["", "-x", "x_y", "a" * 254])
def test_any_objects_name_rules_hold_whatever_else_is_wrong(name: str) -> None:
    # The API server checks every object's name before the CRD's rules, which a wrong
    # type stops.
    problems = validate({"mode": 5, "template": TEMPLATE}, name)
    assert {p.field for p in problems} == {"metadata.name", "spec.mode"}
