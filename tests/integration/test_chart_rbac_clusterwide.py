"""The chart's default install is least privilege, cluster-wide, Kueue included: its
ServiceAccount, ClusterRole, Role and bindings as `helm template` renders them with the
default values, and the operator run with that account's token only, watching every
namespace with leader election and MGJ_KUEUE=on. A plain job and a Kueue-queued job, in
two namespaces, run to success with no reconcile error and no refused request; every
(verb, resource) the operator sent is one the account may send, and the account may do
nothing else it was not meant to (`kubectl auth can-i`).

On a control plane of this module's own: an operator that watches every namespace would
act on the jobs of the tests running beside it on the shared one. Kueue's CRDs are
served, not its controller (a Go build): the test admits the Workload the operator
created by writing the admission Kueue would write, and the operator's own requests
(create, watch and patch the Workload, read the flavor, finish it) go through RBAC.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from cluster.kueue import Kueue
from cluster.localcluster import LocalCluster
from multigpu_operator.api import kueue
from multigpu_operator.api.spec import GROUP, PLURAL, VERSION
from support.chart import render
from support.jobs import SIM, job_manifest, job_status
from support.operator_log import reconcile_errors, refusals
from support.operator_looks import api_requests
from support.operator_process import OperatorProcess
from support.own_cluster import own_cluster
from support.service_account import service_account_kubeconfig
from support.waiting import wait_for

CLUSTER = "mgj-rbac"
RELEASE, RELEASE_NAMESPACE = "mgj", "multigpu-system"
FULL_NAME = "mgj-multigpu-operator"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
FLAVOR, CLUSTER_QUEUE = "default-flavor", "cq"
WORKLOADS = f"{kueue.WORKLOADS}.{kueue.GROUP}"
CACHED_LISTS = [
    *(
        f"/apis/{GROUP}/{VERSION}/{p}?resourceVersion=0"
        for p in (PLURAL, "multigpuruntimes", "clustermultigpuruntimes")
    ),
    *(
        f"/apis/{kueue.API_VERSION}/{r}?resourceVersion=0"
        for r in (kueue.WORKLOADS, kueue.RESOURCE_FLAVORS)
    ),
]
QUICK = {f"{SIM}/succeed-after": "2s"}
# The API group of each resource that mgj_api_requests_total counts ("" is core).
GROUPS = {
    "events": "events.k8s.io",  # the operator posts events.k8s.io/v1 Events
    "multigpujobs": GROUP,
    "multigpuruntimes": GROUP,
    "clustermultigpuruntimes": GROUP,
    "leases": "coordination.k8s.io",
    "customresourcedefinitions": "apiextensions.k8s.io",
    kueue.WORKLOADS: kueue.GROUP,
    kueue.RESOURCE_FLAVORS: kueue.GROUP,
    kueue.WORKLOAD_PRIORITY_CLASSES: kueue.GROUP,
}
# The verbs RBAC checks for the ones mgj_api_requests_total names otherwise: a server-side
# dry run of a create is authorized as the create.
VERBS = {"dry-run": "create"}
# What the account must not be able to do: (verb, group, resource).
NEVER = [
    ("get", "", "secrets"),
    ("list", "", "secrets"),
    ("get", "", "configmaps"),
    ("create", "", "pods/exec"),
    ("update", "", "pods"),
    ("patch", "", "pods"),
    ("delete", "", "services"),
    ("create", "apps", "deployments"),
    ("create", "batch", "jobs"),
    ("patch", GROUP, "multigpujobs"),
    ("create", GROUP, "multigpujobs"),
    ("delete", kueue.GROUP, kueue.WORKLOADS),
    ("create", kueue.GROUP, kueue.RESOURCE_FLAVORS),
    ("create", "coordination.k8s.io", "leases"),  # its Lease lives in the release namespace
    ("patch", "", "nodes"),
    ("create", "rbac.authorization.k8s.io", "clusterroles"),
    ("impersonate", "", "serviceaccounts"),
]


@pytest.fixture(scope="module")
def plane() -> Iterator[LocalCluster]:
    with own_cluster(CLUSTER) as cluster:
        cluster.install_crds(Kueue(cluster).module / "config/components/crd/bases")
        # A list at resourceVersion 0 is served from the watch cache: once it answers, the
        # operator's first lists and watches are not answered 429 while it fills.
        for path in CACHED_LISTS:

            def served(path: str = path) -> bool:
                return cluster.kubectl("get", "--raw", path, check=False).returncode == 0

            wait_for(served, f"{path} served from the watch cache")
        yield cluster


@pytest.fixture
def chart_account(plane: LocalCluster, tmp_path: Path) -> Path:
    """The default render's RBAC applied; a kubeconfig with the account's token only."""
    rendered = render(plane.tools, release=RELEASE, namespace=RELEASE_NAMESPACE)
    rbac = [o for o in rendered if o["kind"] in RBAC_KINDS]
    assert {o["kind"] for o in rbac} == RBAC_KINDS
    plane.kubectl("create", "namespace", RELEASE_NAMESPACE)
    manifest = yaml.safe_dump_all(rbac)
    plane.kubectl("apply", "-n", RELEASE_NAMESPACE, "-f", "-", stdin=manifest)
    return service_account_kubeconfig(
        plane, RELEASE_NAMESPACE, FULL_NAME, tmp_path / "operator.kubeconfig"
    )


def new_namespace(plane: LocalCluster) -> str:
    name = f"rbac-{uuid.uuid4().hex[:6]}"
    plane.kubectl("create", "namespace", name)
    return name


def may(
    auth: client.AuthorizationV1Api, verb: str, group: str, resource: str, namespace: str | None
) -> bool:
    """Whether the chart's account may, in `namespace` or (None) in every namespace: the
    API server's own answer (a SubjectAccessReview, what `kubectl auth can-i` sends)."""
    name, _, subresource = resource.partition("/")
    attributes = client.V1ResourceAttributes(
        verb=verb, group=group, resource=name, subresource=subresource or None,
        namespace=namespace or "",
    )  # fmt: skip
    review = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user=f"system:serviceaccount:{RELEASE_NAMESPACE}:{FULL_NAME}",
            groups=["system:serviceaccounts", f"system:serviceaccounts:{RELEASE_NAMESPACE}"],
            resource_attributes=attributes,
        )
    )
    return bool(auth.create_subject_access_review(review).status.allowed)


def admit(plane: LocalCluster, namespace: str, workload: str) -> None:
    """Admit the Workload as Kueue does: the flavor per resource, then the conditions."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        {"type": ctype, "status": "True", "reason": ctype, "message": "by the test"}
        | {"lastTransitionTime": now}
        for ctype in (kueue.QUOTA_RESERVED, kueue.ADMITTED)
    ]
    assignment = {"name": kueue.POD_SET, "flavors": {"cpu": FLAVOR}, "count": 2}
    status = {"admission": {"clusterQueue": CLUSTER_QUEUE, "podSetAssignments": [assignment]}}
    patch = {"status": status | {"conditions": conditions}}
    plane.kubectl(
        "patch", WORKLOADS, workload, "-n", namespace, "--subresource=status",
        "--type=merge", "-p", json.dumps(patch),
    )  # fmt: skip


def workload_of(plane: LocalCluster, namespace: str) -> str | None:
    got = plane.kubectl("get", WORKLOADS, "-n", namespace, "-o", "name")
    return got.stdout.strip().split("/")[-1] or None


def test_the_default_chart_rbac_runs_jobs_clusterwide_with_kueue_and_no_more(
    plane: LocalCluster, chart_account: Path, tmp_path: Path
) -> None:
    flavor = {"apiVersion": kueue.API_VERSION, "kind": "ResourceFlavor"}
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(flavor | {"metadata": {"name": FLAVOR}}))
    env = {
        "MGJ_LEADER_ELECTION": "true",
        "MGJ_LEASE_NAME": FULL_NAME,
        "MGJ_LEASE_NAMESPACE": RELEASE_NAMESPACE,
    }
    # An empty MGJ_NAMESPACE: the whole cluster, as the chart's default watchNamespace.
    operator = OperatorProcess(chart_account, "", tmp_path / "operator.log", env, kueue="on")
    plain, queued = new_namespace(plane), new_namespace(plane)
    api = config.new_client_from_config(config_file=str(plane.kubeconfig))
    operator.start()
    try:
        plain_job = job_manifest("plain", annotations=QUICK)
        plane.kubectl("apply", "-n", plain, "-f", "-", stdin=json.dumps(plain_job))
        labels = {kueue.QUEUE_NAME_LABEL: "team-queue"}
        queued_job = job_manifest("queued", annotations=QUICK, labels=labels)
        plane.kubectl("apply", "-n", queued, "-f", "-", stdin=json.dumps(queued_job))
        workload = wait_for(lambda: workload_of(plane, queued), "the job's Workload")
        admit(plane, queued, workload)
        for ns, name in ((plain, "plain"), (queued, "queued")):

            def succeeded(ns: str = ns, name: str = name) -> bool:
                return job_status(api, ns, name).get("phase") == "Succeeded"

            wait_for(succeeded, f"{name} Succeeded under the chart's RBAC", timeout=60)
        finished = f"jsonpath={{.status.conditions[?(@.type=='{kueue.FINISHED}')].status}}"
        wait_for(
            lambda: (
                plane.kubectl("get", WORKLOADS, workload, "-n", queued, "-o", finished).stdout
                == "True"
            ),
            "the Workload Finished",
        )
        # The job deleted: the operator drops Kueue's finalizer from the Workload being
        # deleted, which goes. (The test deletes the Workload as the garbage collector
        # would: the collector finds a CRD installed this late only at its next discovery.)
        plane.kubectl("delete", "-n", queued, "mgj/queued")
        plane.kubectl("delete", "-n", queued, WORKLOADS, workload, "--wait=false")
        wait_for(lambda: workload_of(plane, queued) is None, "the Workload gone")
        used = api_requests(operator.metrics())
        assert reconcile_errors(operator) == 0
    finally:
        operator.stop()
    assert refusals(operator) == [], operator.log()
    kueue_writes = {("create", "workloads"), ("patch", "workloads"), ("patch", "workloads/status")}
    assert {("create", "pods"), *kueue_writes} <= used
    # Every request it sent is granted in every namespace, the Lease's in its own.
    auth = client.AuthorizationV1Api(api)
    denied = {
        (verb, res)
        for verb, res in used
        if not may(
            auth, VERBS.get(verb, verb), GROUPS.get(res.partition("/")[0], ""), res,
            RELEASE_NAMESPACE if res == "leases" else None,
        )
    }  # fmt: skip
    assert not denied, f"the chart's RBAC lacks {denied}"
    # And nothing it was not meant to do (the check can say no).
    for scope in (queued, None):
        allowed = [never for never in NEVER if may(auth, *never, scope)]
        assert allowed == [], f"the chart's RBAC grants more than it needs ({scope or 'all'})"
