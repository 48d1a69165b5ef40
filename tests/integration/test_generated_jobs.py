"""Generated specs reconciled for real: each seeded mutation of the examples
(support/spec_mutations.py) is created in a namespace that a running operator watches.
The API server refuses it naming a field, or the operator gives it a status: planned
into pods, or Failed with a condition naming the problem. No reconcile error, no
warning or traceback in the operator's log, and its memory stays flat while rounds of
such jobs come and go.

test_generated_specs.py checks the same mutations against offline validation with dry
runs; this file checks what the operator does with the ones that are stored.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from support.jobs import JobEnv
from support.operator_log import assert_calm
from support.operator_process import OperatorProcess
from support.spec_mutations import Mutation, mutations
from support.waiting import wait_for

pytestmark = pytest.mark.cluster

ROUNDS = 3
PER_ROUND = 120  # mutations tried per round; about a third are stored
# Jobs of more pods are left out so that a round stays a few hundred kwok pods.
MOST_PODS = 8
# RSS may wobble with the allocator; growth in proportion to the jobs seen would not.
RSS_SLACK = 1.15
GROUP = ("multigpu.dev", "v1alpha1")


def test_every_stored_mutation_gets_a_status_and_the_operator_stays_calm_and_flat(
    operator: OperatorProcess, jobs: JobEnv
) -> None:
    custom = client.CustomObjectsApi(jobs.api)
    found = mutations(ROUNDS * PER_ROUND, seed=29)
    rss: list[int] = []
    stored_total = 0
    refusals: list[tuple[Mutation, int]] = []
    for round_ in range(ROUNDS):
        batch = found[round_ * PER_ROUND : (round_ + 1) * PER_ROUND]
        stored: list[str] = []
        for mutation in batch:
            manifest = _named(mutation, jobs.namespace)
            if manifest is None:
                continue
            try:
                custom.create_namespaced_custom_object(
                    *GROUP, jobs.namespace, "multigpujobs", manifest
                )
            except ApiException as err:
                refusals.append((mutation, err.status))
                continue
            stored.append(manifest["metadata"]["name"])
        stored_total += len(stored)

        def statuses(names: list[str] = stored) -> dict[str, dict[str, Any]] | None:
            items = custom.list_namespaced_custom_object(*GROUP, jobs.namespace, "multigpujobs")
            seen = {i["metadata"]["name"]: i.get("status") or {} for i in items["items"]}
            return seen if all(seen.get(n, {}).get("phase") for n in names) else None

        seen = wait_for(statuses, "a phase on every stored job", timeout=180)
        for name in stored:
            status = seen[name]
            if status["phase"] == "Failed":
                failed = [c for c in status["conditions"] if c["type"] == "Failed"]
                assert failed, (name, status)
                assert failed[0]["message"], (name, status)
        rss.append(_rss(operator))

        custom.delete_collection_namespaced_custom_object(*GROUP, jobs.namespace, "multigpujobs")
        wait_for(
            lambda: not jobs.core.list_namespaced_pod(jobs.namespace).items,
            "the round's pods collected",
            timeout=180,
        )
    print(f"\n{stored_total} stored, {len(refusals)} refused; operator RSS by round {rss}")
    # Refused by validation (422), naming the field: never an error of another kind.
    assert [(str(m), s) for m, s in refusals if s != 422] == []
    assert stored_total > ROUNDS * PER_ROUND // 5  # the generator still reaches the operator
    assert rss[-1] <= rss[0] * RSS_SLACK, rss
    assert_calm(operator)


def _named(mutation: Mutation, namespace: str) -> dict[str, Any] | None:
    """The mutation under a name of its own, or None for one of more than MOST_PODS pods."""
    manifest = copy.deepcopy(mutation.manifest)
    spec = manifest.get("spec")
    replicas = spec.get("replicas", 1) if isinstance(spec, dict) else 1
    countable = isinstance(replicas, int | float) and not isinstance(replicas, bool)
    if countable and replicas > MOST_PODS:
        return None
    manifest["metadata"] = {
        **(manifest.get("metadata") or {}),
        "name": f"gen-{mutation.index}",
        "namespace": namespace,
    }
    return manifest


def _rss(operator: OperatorProcess) -> int:
    """The operator process's resident memory, in KiB."""
    assert operator.proc is not None
    for line in Path(f"/proc/{operator.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")
