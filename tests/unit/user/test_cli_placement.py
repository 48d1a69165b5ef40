"""`mgj describe` shows where spec.placement put a job's pods (cli/describe.py)."""

from __future__ import annotations

from multigpu_operator.api.status import JobStatus
from multigpu_operator.cli.describe import placement


def test_domains_in_rank_order_with_their_replicas() -> None:
    status = JobStatus.read(
        {
            "placement": {
                "topologyKey": "example.com/rack",
                "domains": [{"name": "r2", "pods": 4}, {"name": "r3", "pods": 1}],
                "summary": "rack r2 (4 pods), rack r3 (1 pod)",
                "tried": ["r1"],
            }
        }
    )
    assert placement(status) == [
        "Placement: rack (example.com/rack)",
        "  r2: 4 pods (replicas 0-3)",
        "  r3: 1 pod (replica 4)",
        "  tried before: r1",
    ]


def test_none_chosen_and_none_asked() -> None:
    chosen = JobStatus.read({"placement": {"topologyKey": "nvidia.com/gpu.clique"}})
    assert placement(chosen) == [
        "Placement: NVLink clique (nvidia.com/gpu.clique)",
        "  no domain chosen",
    ]
    assert placement(JobStatus()) == []
