"""Which tests share which control plane, so `make test`'s two workers can split them.

Node ids are relative to the repository root. Every cluster test runs in one of three
places:
- the shared cluster (TEST_NAME, with the real node and Kueue), one test at a time, on one
  worker: the default for a module not listed below;
- the simulated cluster (SIMULATED_NAME, simulated nodes only), one test at a time, on the
  other worker once it has run the unit and training tests; only under xdist: a session
  without workers runs these modules on the shared cluster too;
- a control plane of the module's own (INDEPENDENT), started by the module itself.
"""

from __future__ import annotations

import pytest

from cluster.localcluster import SIMULATED_NAME, TEST_NAME

CLUSTER_SCOPE = "tests/integration/"
SIMULATED_SCOPE = "tests/integration/ (simulated nodes)"

# Modules whose every test runs on a control plane of the module's own (no real node, no
# shared cluster, no Kueue of the shared one): they may run beside the shared cluster's
# tests.
INDEPENDENT = (
    "tests/integration/test_chart_rbac_clusterwide.py",
    "tests/integration/test_operator_outage.py",
)

# Modules that need only the shared fixtures on simulated nodes: no real node, no Kueue,
# no late-built tool, nothing left by another module. Chosen so that both workers end
# near the same time: the cold run at 8fd901a spent 1,746 s on the shared cluster's
# tests and 1,493 s on the other worker's (unit 30, training 729, these 542 without the
# operator's answers, independent 192), so the operator's answers (135 s) moved here.
SIMULATED = (
    "tests/integration/test_api_validation.py",
    "tests/integration/test_generated_jobs.py",
    "tests/integration/test_node_faults.py",
    "tests/integration/test_operator_answers.py",
    "tests/integration/test_operator_faults.py",
    "tests/integration/test_operator_ha.py",
    "tests/integration/test_operator_liveness.py",
)


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def independent(nodeid: str) -> bool:
    return module_of(nodeid) in INDEPENDENT


def simulated(nodeid: str) -> bool:
    return module_of(nodeid) in SIMULATED


def scope_of(nodeid: str) -> str:
    """xdist's scope: a scope's tests run on one worker, in collection order."""
    if independent(nodeid):
        return module_of(nodeid)
    if simulated(nodeid):
        return SIMULATED_SCOPE
    return CLUSTER_SCOPE if nodeid.startswith(CLUSTER_SCOPE) else nodeid


def xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def cluster_name(config: pytest.Config, nodeid: str) -> str:
    """The cluster a module of the shared fixtures runs on."""
    return SIMULATED_NAME if xdist_worker(config) and simulated(nodeid) else TEST_NAME
