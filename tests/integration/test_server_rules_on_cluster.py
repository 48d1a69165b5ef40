"""The operator trusts the API server's validation of jobs it checked against the
operator's own CRD rules (api/server_rules.py), on a real API server: the CRD as stored
keeps our schemas exactly, a new job is planned without offline validation, and an
edited one is validated again. The rules themselves: tests/unit/test_server_rules.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.api.crd import CRD_NAME, crd
from multigpu_operator.api.server_rules import rules_enforced_since
from support.jobs import RUN_LONG, JobEnv, job_manifest
from support.operator_process import OperatorProcess
from support.waiting import wait_for

TRUSTED = "the installed CRD's rules are the operator's since"


def validations(operator: OperatorProcess) -> float:
    for line in operator.metrics().splitlines():
        if line.startswith("mgj_spec_validations_total "):
            return float(line.split()[-1])
    raise AssertionError("mgj_spec_validations_total is not served")


def test_the_stored_crd_keeps_our_rules(
    installed_crd: LocalCluster, api_client: client.ApiClient
) -> None:
    stored = client.ApiextensionsV1Api(api_client).read_custom_resource_definition(CRD_NAME)
    as_stored = api_client.sanitize_for_serialization(stored)
    assert rules_enforced_since(as_stored, crd(), datetime.now(UTC)) is not None


def test_a_new_job_is_not_validated_again_and_an_edited_one_is(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    wait_for(lambda: TRUSTED in operator.log(), "the operator trusting the installed CRD")
    time.sleep(1.1)  # created in a later second than the CRD's last change or first sight
    jobs.apply(job_manifest("fresh", annotations=RUN_LONG))
    jobs.wait_phase("fresh", "Running")
    assert validations(operator) == 0
    edited = job_manifest("fresh", annotations=RUN_LONG, suspend=True)
    jobs.apply(edited)  # generation 2: an update may keep invalid old values
    jobs.wait_phase("fresh", "Suspended")
    wait_for(lambda: validations(operator) == 1, "the edited spec validated")
