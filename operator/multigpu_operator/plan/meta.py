"""Metadata every child of a job carries: labels and the owner reference."""

from __future__ import annotations

from typing import Any

from multigpu_operator.api import names
from multigpu_operator.api.spec import API_VERSION, KIND, Job


def job_labels(job: Job) -> dict[str, str]:
    return {
        names.LABEL_JOB_NAME: job.ref.name,
        names.LABEL_MODE: job.spec.mode.value,
        names.LABEL_MANAGED_BY: names.MANAGED_BY,
    }


def owner_references(job: Job) -> list[dict[str, Any]]:
    # Garbage collection deletes the children with the job: no finalizer needed.
    return [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": job.ref.name,
            "uid": job.ref.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
