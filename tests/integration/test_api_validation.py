"""The CRD on a real API server: schema, CEL rules, defaults, scale, explain, columns.

Each invalid spec must be refused with a 422 whose message names the field, and the
offline `validate()` (what `mgj render` checks) must refuse it too, naming the same
fields: that keeps the CRD and the libraries evaluating it offline in step.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from cluster.localcluster import LocalCluster
from multigpu_operator.api.limits import MAX_GPUS_PER_REPLICA, MAX_JOB_SECONDS, MAX_REPLICAS
from multigpu_operator.api.placement import MSG_PLACEMENT_RANK_ORDER
from multigpu_operator.api.rules import (
    MSG_DATA_PARALLEL_REPLICAS,
    MSG_ELASTIC_LAUNCHER,
    MSG_ELASTIC_MIN_MAX,
    MSG_ELASTIC_ONLY_FOR_ELASTIC,
    MSG_ELASTIC_REQUIRED,
    MSG_MIG_ONE_SLICE,
    MSG_MODEL_PARALLEL_ONLY,
    MSG_MODEL_PARALLEL_STAGES,
    MSG_NAME_DNS1035,
    MSG_NAME_TOO_LONG,
    MSG_SCRIPT_ONE_PROCESS,
)
from multigpu_operator.api.runtime_ref import MSG_TEMPLATE_REQUIRED
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import API_VERSION, GROUP, KIND, MAX_NAME_LENGTH, PLURAL, VERSION
from multigpu_operator.api.validation import Problem, validate, with_defaults
from support.dry_run import dry_run_create, refusal_lines
from support.server_answers import SERVER_ANSWERS, names_the_fields
from support.spec_defaults import (
    DEFAULT_GPU_RESOURCE,
    DEFAULT_LAUNCHER,
    DEFAULT_MASTER_PORT,
    DEFAULT_SHM_SIZE,
)
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
TEMPLATE = {"spec": {"containers": [{"name": "trainer", "image": "busybox:1.36"}]}}
ELASTIC = {"minReplicas": 1, "maxReplicas": 4}


def job(spec: dict[str, Any], name: str = "job") -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}


def ddp(**fields: Any) -> dict[str, Any]:
    return {"mode": "DistributedDataParallel", "template": TEMPLATE, **fields}


def create(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    # Strict, as kubectl: unknown fields are errors, not silently dropped.
    created: dict[str, Any] = client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, body, field_validation="Strict"
    )
    return created


def read(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, name
    )
    return obj


INVALID: list[tuple[str, dict[str, Any], str, str]] = [
    # (id, spec, name, what the API server's message must contain)
    ("unknown-mode", ddp(mode="Foo"), "job", 'spec.mode: Unsupported value: "Foo"'),
    (
        "replicas-0",
        ddp(replicas=0),
        "job",
        "spec.replicas in body should be greater than or equal to 1",
    ),
    (
        "replicas-neg",
        ddp(replicas=-1),
        "job",
        "spec.replicas in body should be greater than or equal to 1",
    ),
    (
        "gpus-neg",
        ddp(gpusPerReplica=-1),
        "job",
        "spec.gpusPerReplica in body should be greater than or equal to 0",
    ),
    (
        "port-high",
        ddp(masterPort=65536),
        "job",
        "spec.masterPort in body should be less than or equal to 65535",
    ),
    ("shm-bad", ddp(shmSize="2 GB"), "job", "spec.shmSize in body should match"),
    (
        "start-policy-wait-typo",
        ddp(startPolicy={"onTimeout": "wait"}),
        "job",
        'spec.startPolicy.onTimeout: Unsupported value: "wait"',
    ),
    (
        "no-containers",
        ddp(template={"spec": {"containers": []}}),
        "job",
        "spec.template.spec.containers in body should have at least 1 items",
    ),
    (
        "container-no-name",
        ddp(template={"spec": {"containers": [{"image": "x"}]}}),
        "job",
        "spec.template.spec.containers[0].name: Required value",
    ),
    (
        "no-template",
        {"mode": "DistributedDataParallel"},
        "job",
        f"spec.template: Invalid value: {MSG_TEMPLATE_REQUIRED}",
    ),
    (
        "dp-two-replicas",
        {**ddp(mode="DataParallel"), "replicas": 2},
        "job",
        f"spec.replicas: Invalid value: {MSG_DATA_PARALLEL_REPLICAS}",
    ),
    (
        "elastic-without-policy",
        ddp(mode="Elastic"),
        "job",
        f"spec.elastic: Invalid value: {MSG_ELASTIC_REQUIRED}",
    ),
    (
        "elastic-min-above-max",
        ddp(mode="Elastic", replicas=2, elastic={"minReplicas": 3, "maxReplicas": 2}),
        "job",
        MSG_ELASTIC_MIN_MAX,
    ),
    (
        "elastic-replicas-above-max",
        ddp(mode="Elastic", replicas=5, elastic=ELASTIC),
        "job",
        "spec.replicas: Invalid value: spec.replicas is 5, outside spec.elastic.minReplicas.."
        "maxReplicas (1..4) of this Elastic job",
    ),
    (
        "elastic-script",
        ddp(mode="Elastic", launcher="Script", elastic=ELASTIC),
        "job",
        f"spec.launcher: Invalid value: {MSG_ELASTIC_LAUNCHER}",
    ),
    (
        "elastic-policy-on-ddp",
        ddp(elastic=ELASTIC),
        "job",
        f"spec.elastic: Invalid value: {MSG_ELASTIC_ONLY_FOR_ELASTIC}",
    ),
    (
        "model-parallel-on-ddp",
        ddp(modelParallel={"microBatches": 2}),
        "job",
        MSG_MODEL_PARALLEL_ONLY,
    ),
    (
        "mp-stages-mismatch",
        ddp(mode="ModelParallel", replicas=2, gpusPerReplica=2, modelParallel={"stages": 3}),
        "job",
        f"spec.modelParallel.stages: Invalid value: {MSG_MODEL_PARALLEL_STAGES}",
    ),
    (
        "name-too-long",
        ddp(),
        "a" * (MAX_NAME_LENGTH + 1),
        f"metadata.name: Invalid value: {MSG_NAME_TOO_LONG}",
    ),
    ("name-digit-first", ddp(), "1job", f"metadata.name: Invalid value: {MSG_NAME_DNS1035}"),
    ("name-dot", ddp(), "my.job", MSG_NAME_DNS1035),
    # The findings of issue 13: numbers nobody means, refused naming the field.
    (
        "replicas-100000",
        ddp(replicas=100000),
        "job",
        f"spec.replicas in body should be less than or equal to {MAX_REPLICAS}",
    ),
    (
        "gpus-int32-max",
        ddp(gpusPerReplica=2**31 - 1),
        "job",
        f"spec.gpusPerReplica in body should be less than or equal to {MAX_GPUS_PER_REPLICA}",
    ),
    (
        "deadline-1e12",
        ddp(runPolicy={"activeDeadlineSeconds": 10**12}),
        "job",
        "spec.runPolicy.activeDeadlineSeconds in body should be less than or equal to "
        f"{MAX_JOB_SECONDS}",
    ),
    (
        "ttl-huge",
        ddp(runPolicy={"ttlSecondsAfterFinished": 2**62}),
        "job",
        "spec.runPolicy.ttlSecondsAfterFinished in body should be less than or equal to "
        f"{MAX_JOB_SECONDS}",
    ),
    (
        "script-several-processes",
        ddp(launcher="Script", gpusPerReplica=2),
        "job",
        f"spec.launcher: Invalid value: {MSG_SCRIPT_ONE_PROCESS}",
    ),
    (
        "mig-two-slices",
        ddp(gpuResource="nvidia.com/mig-1g.10gb", gpusPerReplica=2),
        "job",
        f"spec.gpusPerReplica: Invalid value: {MSG_MIG_ONE_SLICE}",
    ),
    (
        "placement-rank-order-the-level",
        ddp(placement={"topologyKey": "example.com/block", "rankOrder": ["example.com/block"]}),
        "job",
        f"spec.placement.rankOrder: Invalid value: {MSG_PLACEMENT_RANK_ORDER}",
    ),
]


@pytest.mark.parametrize(
    ("spec", "name", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_api_server_rejects_invalid_spec(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    spec: dict[str, Any],
    name: str,
    expected: str,
) -> None:
    with pytest.raises(ApiException) as err:
        create(api_client, namespace, job(spec, name))

    assert err.value.status == 422, err.value.body
    message = json.loads(err.value.body)["message"]
    assert expected in message
    # Offline validation refuses it too, naming the fields the server names.
    offline = validate(spec, name)
    assert offline
    assert names_the_fields([p.field for p in offline], refusal_lines(err.value)), offline


def test_api_server_rejects_unknown_field_like_validate(
    installed_crd: LocalCluster, api_client: client.ApiClient, namespace: str
) -> None:
    with pytest.raises(ApiException) as err:
        create(api_client, namespace, job(ddp(gpusPerreplica=2)))

    assert err.value.status == 400
    assert 'unknown field "spec.gpusPerreplica"' in json.loads(err.value.body)["message"]
    assert validate(ddp(gpusPerreplica=2)) == [Problem("spec.gpusPerreplica", "unknown field")]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_is_accepted_and_defaulted_by_the_server(
    installed_crd: LocalCluster, api_client: client.ApiClient, namespace: str, path: Path
) -> None:
    manifest = yaml.safe_load(path.read_text())
    # Server-side apply, as GitOps tools do.
    installed_crd.kubectl("apply", "--server-side", "-n", namespace, "-f", str(path))

    stored = read(api_client, namespace, manifest["metadata"]["name"])["spec"]
    assert stored["gpuResource"] == manifest["spec"].get("gpuResource", DEFAULT_GPU_RESOURCE)
    assert stored["masterPort"] == DEFAULT_MASTER_PORT
    assert stored["launcher"] == manifest["spec"].get("launcher", str(DEFAULT_LAUNCHER))
    assert stored["shmSize"] == DEFAULT_SHM_SIZE
    # Offline defaulting (what `mgj render` sees) is exactly the server's.
    assert stored == with_defaults(spec_schema(), manifest["spec"])


def test_null_shm_size_is_kept(
    installed_crd: LocalCluster, api_client: client.ApiClient, namespace: str
) -> None:
    create(api_client, namespace, job(ddp(shmSize=None)))

    assert read(api_client, namespace, "job")["spec"]["shmSize"] is None


@pytest.mark.parametrize(
    ("spec", "lines"), [c[1:] for c in SERVER_ANSWERS], ids=[c[0] for c in SERVER_ANSWERS]
)
def test_api_server_answers_as_recorded(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    namespace: str,
    spec: dict[str, Any],
    lines: list[str],
) -> None:
    # The corners where the API server differs from JSON Schema (tests/unit/api/test_api_schema.py
    # checks that offline validation refuses them naming the same fields).
    assert sorted(dry_run_create(api_client, namespace, job(spec)).lines) == sorted(lines)


def test_scale_subresource_stays_within_elastic_bounds(
    installed_crd: LocalCluster, api_client: client.ApiClient, namespace: str
) -> None:
    create(api_client, namespace, job(ddp(mode="Elastic", replicas=2, elastic=ELASTIC)))

    refused = installed_crd.kubectl(
        "scale", "-n", namespace, f"{PLURAL}/job", "--replicas=5", check=False
    )
    assert refused.returncode != 0
    # The message gives the allowed range.
    assert (
        "spec.replicas: Invalid value: spec.replicas is 5, outside spec.elastic.minReplicas.."
        "maxReplicas (1..4) of this Elastic job"
    ) in " ".join(refused.stderr.split())

    installed_crd.kubectl("scale", "-n", namespace, f"{PLURAL}/job", "--replicas=4")
    assert read(api_client, namespace, "job")["spec"]["replicas"] == 4


@pytest.mark.parametrize(
    "spec",
    [
        ddp(replicas=2),
        ddp(mode="DataParallel"),
        ddp(mode="ModelParallel", replicas=2, gpusPerReplica=2),
    ],
    ids=["ddp", "data-parallel", "model-parallel"],
)
def test_the_world_size_of_a_fixed_job_cannot_change(
    installed_crd: LocalCluster, api_client: client.ApiClient, namespace: str, spec: dict[str, Any]
) -> None:
    # Scaling would look like a lost pod (up) or be ignored while pods keep the old
    # WORLD_SIZE (down): the API server refuses it, naming the mode.
    created = create(api_client, namespace, job(spec))
    size, mode = created["spec"]["replicas"], created["spec"]["mode"]
    expected = (
        f"spec.replicas: Invalid value: spec.replicas cannot change from {size} to 3 when "
        f"spec.mode is {mode}: the world size (WORLD_SIZE) is fixed when the job starts"
    )

    scaled = installed_crd.kubectl(
        "scale", "-n", namespace, f"{PLURAL}/job", "--replicas=3", check=False
    )
    assert scaled.returncode != 0
    assert expected in " ".join(scaled.stderr.split())
    patched = installed_crd.kubectl(
        "patch", "-n", namespace, f"{PLURAL}/job", "--type=merge",
        "-p", '{"spec": {"replicas": 3}}', check=False,
    )  # fmt: skip
    assert patched.returncode != 0
    assert expected in " ".join(patched.stderr.split())
    assert read(api_client, namespace, "job")["spec"]["replicas"] == size
    # Everything else stays changeable.
    installed_crd.kubectl(
        "patch",
        "-n",
        namespace,
        f"{PLURAL}/job",
        "--type=merge",
        "-p",
        '{"spec": {"suspend": true}}',
    )


def test_readme_quotes_the_api_servers_message(installed_crd: LocalCluster, namespace: str) -> None:
    bad = job({**ddp(mode="DataParallel"), "replicas": 2}, name="bad")
    refused = installed_crd.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(bad), check=False
    )
    assert refused.returncode != 0
    readme = " ".join((REPO / "README.md").read_text().split())
    assert " ".join(refused.stderr.split()) in readme


def test_kubectl_explain_shows_the_descriptions(installed_crd: LocalCluster) -> None:
    wanted = " ".join(spec_schema()["properties"]["elastic"]["description"].split())

    def explained() -> str | None:
        out = installed_crd.kubectl("explain", "multigpujob.spec.elastic", check=False).stdout
        flat = " ".join(out.split())
        return flat if wanted in flat else None

    # The API server publishes a changed CRD's OpenAPI shortly after it is applied.
    flat = wait_for(explained, "kubectl explain to show spec.elastic's description")
    assert "minReplicas <integer> -required-" in flat


def test_printer_columns(
    installed_crd: LocalCluster, api_client: client.ApiClient, namespace: str
) -> None:
    create(api_client, namespace, job(ddp(replicas=2, gpusPerReplica=4)))

    out = installed_crd.kubectl("get", "mgj", "-n", namespace).stdout.split("\n")
    header = [
        "NAME",
        "MODE",
        "REPLICAS",
        "WORLD",
        "GPUS/REPLICA",
        "PHASE",
        "REASON",
        "RESTARTS",
        "PLACEMENT",
        "RUNTIME",
        "PROGRESS",
        "ETA",
        "AGE",
    ]
    assert out[0].split() == header
    assert out[1].split()[:4] == ["job", "DistributedDataParallel", "2", "4"]
