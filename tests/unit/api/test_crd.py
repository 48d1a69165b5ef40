"""Offline validation of jobs against the CRD generated from the API's declaration (api/).
The CRD's own shape and manifest: tests/unit/api/test_crd_shape.py; the counts'
maximums: tests/unit/api/test_crd_bounds.py; the failure policy's rules:
tests/unit/api/test_crd_failure_rules.py.

The same rules run on the API server (tests/integration/test_api_validation.py); here
the offline side is checked without a cluster: each invalid spec is refused naming its
field, with the rule's message (or the schema library's words).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from multigpu_operator.api.crd import crd
from multigpu_operator.api.placement import PLACEMENT_RULES
from multigpu_operator.api.rules import (
    FAILURE_POLICY_RULES,
    MSG_DATA_PARALLEL_REPLICAS,
    MSG_DNS_NAMES_IMMUTABLE,
    MSG_ELASTIC_LAUNCHER,
    MSG_ELASTIC_MIN_MAX,
    MSG_ELASTIC_ONLY_FOR_ELASTIC,
    MSG_ELASTIC_REQUIRED,
    MSG_MIG_ONE_SLICE,
    MSG_MODEL_PARALLEL_ONLY,
    MSG_MODEL_PARALLEL_STAGES,
    MSG_NAME_DNS1035,
    MSG_NAME_TOO_LONG,
    MSG_REPLICAS_FIXED,
    MSG_SCRIPT_ONE_PROCESS,
    NAME_RULES,
    SPEC_RULES,
)
from multigpu_operator.api.runtime_ref import MSG_MODE_REQUIRED, MSG_TEMPLATE_REQUIRED
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import MAX_NAME_LENGTH, Mode
from multigpu_operator.api.validation import Problem, validate, validate_object, with_defaults
from support.crd_specs import (
    TEMPLATE,
    Refused,
    assert_refused,
    elastic,
    refused_cases,
    spec,
    untested,
)
from support.spec_defaults import DEFAULT_MASTER_PORT

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


# --- offline validation ------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_is_valid(path: Path) -> None:
    assert validate_object(yaml.safe_load(path.read_text())) == []


def test_there_is_an_example_per_mode() -> None:
    modes = {yaml.safe_load(p.read_text())["spec"]["mode"] for p in EXAMPLES}
    assert modes == {str(m) for m in Mode}


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        (
            spec(mode="ModelParallel", replicas=2, gpusPerReplica=2, modelParallel={"stages": 4}),
            "j",
        ),
        (
            spec(mode="ModelParallel", replicas=2, gpusPerReplica=0, modelParallel={"stages": 2}),
            "j",
        ),
        (
            spec(mode="ModelParallel", replicas=1, gpusPerReplica=4, modelParallel={"stages": 2}),
            "j",
        ),
        (spec(shmSize="0"), "j"),
        (spec(shmSize=None), "j"),
        (spec(shmSize="512Mi"), "j"),
        (elastic(replicas=4), "j"),
        (spec(), "a" * MAX_NAME_LENGTH),
        (spec(), "a-1"),
        (spec(gpusPerReplica=0, gpuProduct="NVIDIA-H100-80GB-HBM3"), "j"),
        (spec(template={"metadata": {"labels": {"a": "b"}}, **TEMPLATE}), "j"),
        (spec(startPolicy={"timeoutSeconds": 0, "onTimeout": "Wait"}), "j"),
    ],
    ids=[
        "mp-stages-per-process",
        "mp-cpu-stages",
        "mp-one-pod-any-stages",
        "shm-zero",
        "shm-null",
        "shm-512Mi",
        "elastic-at-max",
        "name-at-max-length",
        "name-with-digit",
        "gpu-product",
        "template-labels",
        "start-policy",
    ],
)
def test_valid(raw: dict[str, Any], name: str) -> None:
    assert validate(raw, name) == []


INVALID: list[Refused] = [
    ("unknown-mode", spec(mode="Foo"), "j", "spec.mode", "'Foo' is not one of"),
    # Unless spec.runtimeRef names a runtime (tests/unit/api/test_runtime_crd.py).
    ("no-mode", {"template": TEMPLATE}, "j", "spec.mode", MSG_MODE_REQUIRED),
    ("no-template", {"mode": "DataParallel"}, "j", "spec.template", MSG_TEMPLATE_REQUIRED),
    ("replicas-0", spec(replicas=0), "j", "spec.replicas", "less than the minimum of 1"),
    ("replicas-neg", spec(replicas=-1), "j", "spec.replicas", "less than the minimum of 1"),
    ("replicas-str", spec(replicas="2"), "j", "spec.replicas", "is not of type 'integer'"),
    ("replicas-bool", spec(replicas=True), "j", "spec.replicas", "is not of type 'integer'"),
    ("replicas-float", spec(replicas=2.0), "j", "spec.replicas", "written as an integer"),
    ("gpus-neg", spec(gpusPerReplica=-1), "j", "spec.gpusPerReplica", "less than the minimum"),
    ("port-0", spec(masterPort=0), "j", "spec.masterPort", "less than the minimum of 1"),
    ("port-high", spec(masterPort=65536), "j", "spec.masterPort", "greater than the maximum"),
    ("shm-bad", spec(shmSize="2 GB"), "j", "spec.shmSize", "does not match"),
    ("bad-launcher", spec(launcher="mpirun"), "j", "spec.launcher", "'mpirun' is not one of"),
    (
        "start-timeout-neg",
        spec(startPolicy={"timeoutSeconds": -1}),
        "j",
        "spec.startPolicy.timeoutSeconds",
        "less than the minimum of 0",
    ),
    (
        "start-on-timeout",
        spec(startPolicy={"onTimeout": "Requeue"}),
        "j",
        "spec.startPolicy.onTimeout",
        "'Requeue' is not one of",
    ),
    (
        "bad-schedule",
        spec(mode="ModelParallel", modelParallel={"schedule": "Interleaved"}),
        "j",
        "spec.modelParallel.schedule",
        "'Interleaved' is not one of",
    ),
    (
        "micro-batches-0",
        spec(mode="ModelParallel", modelParallel={"microBatches": 0}),
        "j",
        "spec.modelParallel.microBatches",
        "less than the minimum of 1",
    ),
    (
        "mp-stages-0",
        spec(mode="ModelParallel", modelParallel={"stages": 0}),
        "j",
        "spec.modelParallel.stages",
        "less than the minimum of 1",
    ),
    (
        "no-containers",
        spec(template={"spec": {"containers": []}}),
        "j",
        "spec.template.spec.containers",
        "should be non-empty",
    ),
    (
        "container-no-name",
        spec(template={"spec": {"containers": [{"image": "x"}]}}),
        "j",
        "spec.template.spec.containers[0].name",
        "required field is missing",
    ),
    ("unknown-field", spec(gpusPerreplica=2), "j", "spec.gpusPerreplica", "unknown field"),
    (
        "set-duplicates",
        spec(runPolicy={"retryableExitCodes": [3, 3]}),
        "j",
        "spec.runPolicy.retryableExitCodes",
        "non-unique",
    ),
    (
        "elastic-max-restarts-neg",
        elastic(elastic={"minReplicas": 1, "maxReplicas": 2, "maxRestarts": -1}),
        "j",
        "spec.elastic.maxRestarts",
        "less than the minimum of 0",
    ),
    (
        "elastic-min-0",
        elastic(elastic={"minReplicas": 0, "maxReplicas": 2}),
        "j",
        "spec.elastic.minReplicas",
        "less than the minimum of 1",
    ),
    (
        "elastic-no-max",
        spec(mode="Elastic", elastic={"minReplicas": 1}),
        "j",
        "spec.elastic.maxReplicas",
        "required field is missing",
    ),
    (
        "dp-two-replicas",
        spec(mode="DataParallel", replicas=2),
        "j",
        "spec.replicas",
        MSG_DATA_PARALLEL_REPLICAS,
    ),
    ("elastic-without-policy", spec(mode="Elastic"), "j", "spec.elastic", MSG_ELASTIC_REQUIRED),
    (
        "elastic-policy-on-ddp",
        spec(elastic={"minReplicas": 1, "maxReplicas": 2}),
        "j",
        "spec.elastic",
        MSG_ELASTIC_ONLY_FOR_ELASTIC,
    ),
    (
        "elastic-min-above-max",
        elastic(elastic={"minReplicas": 3, "maxReplicas": 2}),
        "j",
        "spec.elastic.minReplicas",
        MSG_ELASTIC_MIN_MAX,
    ),
    (
        "elastic-replicas-above-max",
        elastic(replicas=5),
        "j",
        "spec.replicas",
        "spec.replicas is 5, outside spec.elastic.minReplicas..maxReplicas (1..4) of this "
        "Elastic job (spec.replicas defaults to 1): set spec.replicas inside that range, or "
        "scale the job within it",
    ),
    (
        "elastic-default-replicas-below-min",
        spec(mode="Elastic", elastic={"minReplicas": 2, "maxReplicas": 4}),
        "j",
        "spec.replicas",
        "spec.replicas is 1, outside spec.elastic.minReplicas..maxReplicas (2..4)",
    ),
    (
        "script-ddp-two-gpus",
        spec(launcher="Script", gpusPerReplica=2),
        "j",
        "spec.launcher",
        MSG_SCRIPT_ONE_PROCESS,
    ),
    (
        "script-model-parallel-across-pods",
        spec(
            mode="ModelParallel", launcher="Script", replicas=2, gpusPerReplica=4, modelParallel={}
        ),
        "j",
        "spec.launcher",
        MSG_SCRIPT_ONE_PROCESS,
    ),
    ("elastic-script", elastic(launcher="Script"), "j", "spec.launcher", MSG_ELASTIC_LAUNCHER),
    (
        "model-parallel-on-ddp",
        spec(modelParallel={"microBatches": 2}),
        "j",
        "spec.modelParallel",
        MSG_MODEL_PARALLEL_ONLY,
    ),
    (
        "mp-stages-mismatch",
        spec(mode="ModelParallel", replicas=2, gpusPerReplica=2, modelParallel={"stages": 3}),
        "j",
        "spec.modelParallel.stages",
        MSG_MODEL_PARALLEL_STAGES,
    ),
    (
        "mig-two-slices",
        spec(gpuResource="nvidia.com/mig-1g.10gb", gpusPerReplica=2),
        "j",
        "spec.gpusPerReplica",
        MSG_MIG_ONE_SLICE,
    ),
    ("name-too-long", spec(), "a" * (MAX_NAME_LENGTH + 1), "metadata.name", MSG_NAME_TOO_LONG),
    ("name-digit-first", spec(), "1job", "metadata.name", MSG_NAME_DNS1035),
    ("name-dot", spec(), "my.job", "metadata.name", MSG_NAME_DNS1035),
    ("name-upper", spec(), "Job", "metadata.name", MSG_NAME_DNS1035),
    ("name-dash-last", spec(), "job-", "metadata.name", MSG_NAME_DNS1035),
]


@refused_cases(INVALID)
def test_invalid(raw: dict[str, Any], name: str, field: str, expected: str) -> None:
    assert_refused(raw, name, field, expected)


def test_every_rule_has_an_invalid_case() -> None:
    # The failure policy's rules: tests/unit/api/test_crd_failure_rules.py; placement's:
    # tests/unit/api/test_crd_placement.py.
    own = (*FAILURE_POLICY_RULES, *PLACEMENT_RULES)
    others = [r for r in (*SPEC_RULES, *NAME_RULES) if r not in own]
    assert untested(others, {c[4] for c in INVALID}) == []


def test_rule_messages_name_the_field() -> None:
    for rule in (*SPEC_RULES, *NAME_RULES):
        assert rule.message.startswith(("spec.", "metadata.")), rule.message
        assert rule.message in str(crd()), rule.message
        if rule.message_expression is not None:
            assert rule.message_expression.startswith(("'spec.", "'metadata.")), rule
            assert rule.message_expression in str(crd()), rule


def test_the_world_size_is_fixed_except_for_elastic() -> None:
    (fixed,) = (r for r in SPEC_RULES if r.transition and r.field_path == ".replicas")
    assert fixed.message == MSG_REPLICAS_FIXED
    # Checked by the API server on updates; a new job has no stored replicas to keep.
    assert validate(spec(replicas=3)) == []


def test_managed_by_names_a_controller_and_never_changes() -> None:
    (immutable,) = (r for r in SPEC_RULES if r.transition and r.field_path == ".managedBy")
    assert "oldSelf.managedBy" in immutable.cel
    assert validate(spec(managedBy="kueue.x-k8s.io/multikueue")) == []
    assert validate(spec(managedBy="multigpu.dev/operator")) == []
    (problem,) = validate(spec(managedBy="multikueue"))
    assert problem.field == "spec.managedBy"


def test_dns_names_is_one_of_two_and_never_changes() -> None:
    (immutable,) = (r for r in SPEC_RULES if r.transition and r.field_path == ".dnsNames")
    assert immutable.message == MSG_DNS_NAMES_IMMUTABLE
    assert validate(spec(dnsNames="Replica0")) == []
    (problem,) = validate(spec(dnsNames="Pod0"))
    assert problem.field == "spec.dnsNames"
    assert "'Pod0' is not one of ['EveryReplica', 'Replica0']" in problem.message


@pytest.mark.parametrize(
    "raw",
    [
        spec(launcher="Script", gpusPerReplica=1, replicas=4),
        spec(launcher="Script", gpusPerReplica=0, replicas=2),
        spec(mode="DataParallel", launcher="Script", gpusPerReplica=4),
        spec(mode="ModelParallel", launcher="Script", gpusPerReplica=4),
        spec(mode="ModelParallel", launcher="Script", replicas=2, gpusPerReplica=1),
    ],
    ids=["ddp-one-gpu", "ddp-cpu", "data-parallel", "model-parallel-one-pod", "mp-one-gpu"],
)
def test_script_runs_where_each_pod_runs_one_process(raw: dict[str, Any]) -> None:
    assert validate(raw, "j") == []


MIG = "nvidia.com/mig-3g.40gb"

# (id, spec, whether the API accepts it): a CUDA process sees one MIG slice, in every mode.
MIG_SLICES: list[tuple[str, dict[str, Any], bool]] = [
    ("ddp-one-slice", spec(gpuResource=MIG, gpusPerReplica=1, replicas=4), True),
    ("ddp-cpu", spec(gpuResource=MIG, gpusPerReplica=0), True),
    ("ddp-two-slices", spec(gpuResource=MIG, gpusPerReplica=2), False),
    ("dp-one-slice", spec(mode="DataParallel", gpuResource=MIG), True),
    ("dp-seven-slices", spec(mode="DataParallel", gpuResource=MIG, gpusPerReplica=7), False),
    ("mp-one-pod", spec(mode="ModelParallel", gpuResource=MIG, gpusPerReplica=2), False),
    ("mp-across-pods", spec(mode="ModelParallel", gpuResource=MIG, replicas=2), True),
    ("elastic-one-slice", elastic(gpuResource=MIG), True),
    ("elastic-two-slices", elastic(gpuResource=MIG, gpusPerReplica=2), False),
    ("whole-gpus", spec(gpusPerReplica=8), True),
    ("other-vendor", spec(gpuResource="amd.com/gpu", gpusPerReplica=8), True),
    # MIG's "single" strategy names slices nvidia.com/gpu: nothing tells them apart.
    ("mig-single-strategy", spec(gpuResource="nvidia.com/gpu", gpusPerReplica=2), True),
]


@pytest.mark.parametrize(
    ("raw", "accepted"), [c[1:] for c in MIG_SLICES], ids=[c[0] for c in MIG_SLICES]
)
def test_a_mig_profile_gives_each_pod_one_slice(raw: dict[str, Any], accepted: bool) -> None:
    refusal = Problem("spec.gpusPerReplica", MSG_MIG_ONE_SLICE)
    assert validate(raw, "j") == ([] if accepted else [refusal])


def test_cross_field_rules_wait_for_schema_errors_to_be_fixed() -> None:
    # As on the API server: rules that read replicas are not run on a non-integer one.
    assert validate(spec(mode="DataParallel", replicas="2")) == [
        Problem("spec.replicas", "'2' is not of type 'integer'")
    ]


def test_validate_object_needs_a_spec() -> None:
    assert [p.field for p in validate_object({"metadata": {"name": "j"}})] == ["spec"]


def test_null_shm_size_is_kept_and_other_nulls_default() -> None:
    defaulted = with_defaults(spec_schema(), spec(shmSize=None, masterPort=None))
    assert defaulted["shmSize"] is None
    assert defaulted["masterPort"] == DEFAULT_MASTER_PORT
