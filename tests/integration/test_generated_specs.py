"""Offline validation agrees with a real API server on thousands of generated specs.

Each seeded mutation of the examples (support/spec_mutations.py: type changes, nulls,
int32/int64 bounds, huge numbers, empty strings, missing and unknown fields, nested
nulls, set duplicates, values that reach the cross-field rules) is created with a
server-side dry run and checked offline by `validate()`: both accept it, or both refuse
it, and then the offline problems name the fields the server names (each in its own
words: the libraries' and the rules' messages offline). An accepted spec is stored
exactly as `with_defaults` predicts, and the planner turns it into pods or names what
conflicts (PlanError), never raises anything else. A failure names the mutation;
`mutations(COUNT)[index]` replays it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client

from cluster.localcluster import LocalCluster
from multigpu_operator.api.schema import spec_schema
from multigpu_operator.api.spec import Job
from multigpu_operator.api.validation import validate_object, with_defaults
from multigpu_operator.plan import PlanError, plan_job
from support.dry_run import Answer, dry_run_create
from support.server_answers import names_the_fields
from support.spec_mutations import Mutation, mutations, summary

pytestmark = pytest.mark.cluster

COUNT = 3000
# Dry runs store nothing, so every mutation can use the same namespace and name.
NAMESPACE = "default"
SHOWN = 10  # disagreements printed in full


@pytest.fixture(scope="module")
def answered(
    installed_crd: LocalCluster, api_client: client.ApiClient
) -> list[tuple[Mutation, Answer]]:
    found = mutations(COUNT)
    print("\n".join(summary(found)))
    with ThreadPoolExecutor(4) as pool:
        answers = pool.map(lambda m: dry_run_create(api_client, NAMESPACE, m.manifest), found)
        return list(zip(found, answers, strict=True))


def test_offline_validation_agrees_with_the_api_server(
    answered: list[tuple[Mutation, Answer]],
) -> None:
    disagreements = []
    for mutation, answer in answered:
        offline = validate_object(mutation.manifest)
        refused = answer.stored is None
        if bool(offline) != refused or (
            refused and not names_the_fields([p.field for p in offline], answer.lines)
        ):
            disagreements.append(
                f"{mutation}\n  server:  {answer.lines or 'accepted'}\n  offline: "
                f"{[str(p) for p in offline] or 'accepted'}"
            )
    assert disagreements == [], f"{len(disagreements)} of {COUNT} disagree:\n" + "\n".join(
        disagreements[:SHOWN]
    )


def test_the_mutations_reach_every_kind_of_answer(
    answered: list[tuple[Mutation, Answer]],
) -> None:
    # The generator must keep reaching acceptance, the schema, the formats, the CEL rules
    # and strict field validation, or the agreement above proves little.
    lines = [line for _, answer in answered for line in answer.lines]
    accepted = sum(answer.stored is not None for _, answer in answered)
    assert accepted > COUNT // 5
    seen = {
        kind: sum(text in line for line in lines)
        for kind, text in (
            ("bounds", "in body should be"),
            ("types", "in body must be of type"),
            ("formats", "Checked value must be of type integer"),
            ("unknown fields", "unknown field"),
            ("required", "Required value"),
            ("enums", "Unsupported value"),
            ("sets", "Duplicate value"),
            ("scale", "accessor error"),
            ("CEL rules", "Invalid value: spec."),
            ("CEL errors", "evaluating rule"),
        )
    }
    assert all(n > 0 for n in seen.values()), seen
    assert min(n for kind, n in seen.items() if kind != "CEL errors") > 20, seen


def test_accepted_specs_are_stored_as_offline_defaulting_says(
    answered: list[tuple[Mutation, Answer]],
) -> None:
    differ = [
        f"{mutation}\n  server:  {answer.stored['spec']}\n  offline: {offline}"
        for mutation, answer in answered
        if answer.stored is not None
        and answer.stored["spec"]
        != (offline := with_defaults(spec_schema(), mutation.manifest["spec"]))
    ]
    assert differ == [], "\n".join(differ[:SHOWN])


def test_every_accepted_spec_is_planned_or_named_as_a_conflict(
    answered: list[tuple[Mutation, Answer]],
) -> None:
    crashed = []
    for mutation, answer in answered:
        if answer.stored is None:
            continue
        stored = {**answer.stored, "metadata": {**answer.stored["metadata"], "uid": "uid"}}
        try:
            plan_job(Job.from_object(stored))
        except PlanError:
            pass  # the job fails with InvalidSpec naming the field
        except Exception as err:
            crashed.append(f"{mutation}: {type(err).__name__}: {err}")
    assert crashed == [], "\n".join(crashed[:SHOWN])
