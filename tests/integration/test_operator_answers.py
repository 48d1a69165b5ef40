"""The operator, as a real process, meets the API server's refusals and expected
answers: each ends in a condition a user can read, an Event, and no error storm (no
traceback in its log, nothing in mgj_reconcile_errors_total). The same rules on the
fake cluster: tests/unit/controller/test_controller_faults.py."""

from __future__ import annotations

import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client

from cluster.localcluster import LocalCluster
from support.events import list_events, wait_event
from support.jobs import RUN_LONG, JobEnv, condition, job_manifest
from support.operator_log import assert_calm
from support.operator_looks import idle
from support.operator_process import OperatorProcess
from support.waiting import wait_for

QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "pods"}}


def events_of(jobs: JobEnv, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in list_events(jobs.api, jobs.namespace)
        if e.get("regarding", {}).get("name") == name
    ]


def with_pod_spec(name: str, **pod_spec: Any) -> dict[str, Any]:
    manifest = job_manifest(name, annotations=RUN_LONG)
    manifest["spec"]["template"]["spec"].update(pod_spec)
    return manifest


# Each refused by the real API server's admission, in its own words.
REFUSED: dict[str, tuple[dict[str, Any], str, str]] = {
    "priority": (
        {"priorityClassName": "no-such-class"},
        "spec.template.spec.priorityClassName",
        "no PriorityClass with name no-such-class was found",
    ),
    "runtime": (
        {"runtimeClassName": "no-such-runtime"},
        "spec.template.spec.runtimeClassName",
        'RuntimeClass "no-such-runtime" not found',
    ),
    "overhead": (
        {"overhead": {"cpu": "100m"}},
        "spec.template.spec.overhead",
        "Pod Overhead set without corresponding RuntimeClass defined Overhead",
    ),
    "preemption": (
        {"preemptionPolicy": "Never"},
        "spec.template.spec.preemptionPolicy",
        "the string value of PreemptionPolicy (Never) must not be provided in pod spec",
    ),
}


def test_refused_pods_fail_their_jobs_naming_the_field_and_the_servers_message(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    for name, (pod_spec, _, _) in REFUSED.items():
        jobs.apply(with_pod_spec(name, **pod_spec))
    # Misspelt fields: refused under strict field validation, never silently dropped.
    jobs.apply(with_pod_spec("typo", hostNetwrok=True, nodeSelectr={"a": "b"}))

    for name, (_, field, words) in REFUSED.items():
        status = jobs.wait_phase(name, "Failed")
        failed = condition(status, "Failed")
        assert failed["reason"] == "PodForbidden"
        assert failed["message"].startswith(f'{field}: pods "{name}-')
        assert words in failed["message"]
        assert not jobs.pods(name)
        wait_event(jobs.api, jobs.namespace, "PodForbidden", regarding=name, type_="Warning")
    failed = condition(jobs.wait_phase("typo", "Failed"), "Failed")
    assert failed["reason"] == "InvalidPodTemplate"
    assert 'unknown field "spec.hostNetwrok"' in failed["message"]
    assert 'unknown field "spec.nodeSelectr"' in failed["message"]
    assert not jobs.pods("typo")
    assert_calm(operator)


def test_a_suspended_job_with_a_misspelt_field_fails_at_once_naming_it(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    typo = job_manifest("typo-suspended", suspend=True)
    typo["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    jobs.apply(typo)
    jobs.apply(job_manifest("suspended", suspend=True))

    # Never resumed: the operator's dry run of its first pod met the same strict field
    # validation a create meets.
    status = jobs.wait_phase("typo-suspended", "Failed")
    failed = condition(status, "Failed")
    assert failed["reason"] == "InvalidPodTemplate"
    assert 'unknown field "spec.containers[0].imagePullPolicyy"' in failed["message"]
    assert condition(status, "Suspended")["status"] == "True"
    assert not jobs.pods("typo-suspended")
    posted = wait_for(partial(events_of, jobs, "typo-suspended"), "its event")
    assert ("Warning", "InvalidPodTemplate") in {(e["type"], e["reason"]) for e in posted}
    # A valid suspended job is checked as well, and stays suspended.
    assert jobs.wait_phase("suspended", "Suspended")
    assert not jobs.pods("suspended")
    assert_calm(operator)


def test_a_full_quota_and_a_missing_service_account_are_waited_for_then_the_pods_created(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    jobs.apply({**QUOTA, "spec": {"hard": {"pods": "1"}}})
    jobs.apply(job_manifest("q", replicas=2, annotations=RUN_LONG))
    # Its ServiceAccount applied after it, as one `kubectl apply -f` of both may do.
    jobs.apply(with_pod_spec("sa", serviceAccountName="trainer"))

    # (job, the Created condition's reason while it waits, its field, the server's words)
    waits = [
        ("q", "QuotaExceeded", "spec.template.spec.containers[].resources", "exceeded quota: pods"),
        (
            "sa",
            "ServiceAccountMissing",
            "spec.template.spec.serviceAccountName",
            'serviceaccount "trainer" not found',
        ),
    ]
    for name, reason, field, words in waits:

        def waiting(name: str = name, reason: str = reason) -> dict[str, Any] | None:
            created = condition(jobs.status(name), "Created")
            return created if created.get("reason") == reason else None

        created = wait_for(waiting, f"{name}: Created=False {reason}")
        assert created["status"] == "False"
        assert created["message"].startswith(f"{field}: ")
        assert words in created["message"]
        assert jobs.status(name)["phase"] == "Pending"

        def warned(name: str = name, reason: str = reason) -> list[str]:
            return [e["type"] for e in events_of(jobs, name) if e["reason"] == reason]

        # The Event is posted after the status write that the wait above saw.
        assert wait_for(warned, f"{name}: its {reason} Event") == ["Warning"]

    jobs.apply({**QUOTA, "spec": {"hard": {"pods": "10"}}})
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer"}}
    jobs.apply(account)
    for name in ("q", "sa"):
        jobs.wait_phase(name, "Running", timeout=90)  # the retry backoff, up to a minute
        assert condition(jobs.status(name), "Created")["reason"] == "PodsCreated"
    assert_calm(operator)


def test_a_deleted_service_is_created_again_running_operator_or_not(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    jobs.apply(job_manifest("svc", annotations=RUN_LONG))
    jobs.wait_phase("svc", "Running")
    first = jobs.core.read_namespaced_service("svc", jobs.namespace).metadata.uid

    jobs.core.delete_namespaced_service("svc", jobs.namespace)
    second = wait_for(lambda: service_uid(jobs, "svc", other_than=first), "Service again")

    operator.kill()
    jobs.core.delete_namespaced_service("svc", jobs.namespace)
    operator.start()
    wait_for(lambda: service_uid(jobs, "svc", other_than=second), "Service after a restart")
    assert jobs.status("svc")["phase"] == "Running"
    assert_calm(operator)


def service_uid(jobs: JobEnv, name: str, other_than: str) -> str | None:
    try:
        uid = jobs.core.read_namespaced_service(name, jobs.namespace).metadata.uid
    except client.ApiException:
        return None
    return str(uid) if uid != other_than else None


def test_events_stay_within_the_apis_limits(operator: OperatorProcess, jobs: JobEnv) -> None:
    # A refusal listing 40 unknown fields of two-byte characters: over 1024 bytes, while
    # the API server refuses an Event whose note is (an event name too long for it is
    # refused by the CRD: tests/unit/cluster/test_cluster_events.py).
    fields = {f"champ_inconnu_é_{i:02}": True for i in range(40)}
    jobs.apply(with_pod_spec("long-note", **fields))

    failed = condition(jobs.wait_phase("long-note", "Failed"), "Failed")
    assert failed["reason"] == "InvalidPodTemplate"
    assert len(failed["message"].encode()) > 1024
    posted = wait_for(partial(events_of, jobs, "long-note"), "its event")
    assert posted[0]["reason"] == "InvalidPodTemplate"
    assert len(posted[0]["note"].encode()) <= 1024
    assert failed["message"].startswith(posted[0]["note"].removesuffix("..."))
    assert_calm(operator)


def test_jobs_deleted_while_they_are_reconciled_leave_nothing_alarming(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    # Each job is deleted the moment it is created: its first pass writes the status,
    # creates the Service and pods of a job that is gone or going.
    custom = client.CustomObjectsApi(jobs.api)
    for i in range(40):
        manifest = job_manifest(f"brief-{i}", annotations=RUN_LONG)
        custom.create_namespaced_custom_object(
            "multigpu.dev", "v1alpha1", jobs.namespace, "multigpujobs", manifest
        )
        time.sleep(0.05 * (i % 5))  # deleted at different moments of the first pass
        custom.delete_namespaced_custom_object(
            "multigpu.dev", "v1alpha1", jobs.namespace, "multigpujobs", f"brief-{i}"
        )

    def collected() -> bool:
        pods = jobs.core.list_namespaced_pod(jobs.namespace).items
        services = jobs.core.list_namespaced_service(jobs.namespace).items
        return not pods and not services

    wait_for(collected, "every child garbage-collected", timeout=60)
    # Every job forgotten, the passes the deletions woke have run.
    wait_for(lambda: idle(operator, jobs.namespace), "the operator idle, its caches empty")
    assert_calm(operator)


def test_a_namespace_deleted_under_running_jobs_ends_them_quietly(
    installed_crd: LocalCluster,
    api_client: client.ApiClient,
    core: client.CoreV1Api,
    tmp_path: Path,
) -> None:
    # Its own namespace: the test deletes it, as the fixture's would be.
    namespace = f"doomed-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    operator = OperatorProcess(installed_crd.kubeconfig, namespace, tmp_path / "operator.log")
    operator.start()
    try:
        jobs = JobEnv(installed_crd, api_client, core, namespace)
        for i in range(4):
            jobs.apply(job_manifest(f"j{i}", annotations=RUN_LONG))
        for i in range(4):
            jobs.wait_phase(f"j{i}", "Running")
        core.delete_namespace(namespace)

        def gone() -> bool:
            try:
                core.read_namespace(namespace)
            except client.ApiException as err:
                return bool(err.status == 404)
            return False

        wait_for(gone, "namespace gone", timeout=120)
        assert_calm(operator)
    finally:
        operator.stop()
