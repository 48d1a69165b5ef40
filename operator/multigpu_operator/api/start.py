"""A job's start policy: what happens when a container of the job cannot start.

The kubelet retries most start problems on its own (an image pull backs off and tries
again, a container waiting for a missing ConfigMap key is retried), so none of them ever
ends a pod: without a policy a job whose image is misspelt would hold its GPUs forever.
Declared once as a typed model (api/base.py), like the other policies.
"""

from __future__ import annotations

import enum

from pydantic import Field

from multigpu_operator.api.base import ApiModel, Int32
from multigpu_operator.api.limits import MAX_WAIT_SECONDS


class StartTimeoutAction(enum.StrEnum):
    FAIL = "Fail"  # fail the job; its pods are cleaned up as for any failure
    WAIT = "Wait"  # keep waiting, with the Running condition saying what for


class StartPolicy(ApiModel):
    """What happens when a container of the job cannot start: its image cannot be
    pulled, its ConfigMap or Secret (key) is missing, or the runtime cannot create or
    run it. Errors no retry can fix (InvalidImageName, ErrImageNeverPull) apply
    onTimeout at once; the others (ErrImagePull, ImagePullBackOff,
    CreateContainerConfigError, CreateContainerError, RunContainerError) once they have
    lasted timeoutSeconds without a pause. A container in CrashLoopBackOff did start:
    the kubelet keeps restarting it and the job waits (runPolicy.activeDeadlineSeconds
    bounds that wait). Either way the Running condition names the pod, replica,
    container, image and the kubelet's message."""

    timeout_seconds: Int32 = Field(
        300,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=(
            "How long a container may keep failing to start (image pull back-off, missing "
            "ConfigMap or Secret key, creation errors) before onTimeout applies: up to a "
            "week; onTimeout Wait waits forever."
        ),
    )
    on_timeout: StartTimeoutAction = Field(
        StartTimeoutAction.FAIL,
        description=(
            "Fail: the job fails with the kubelet's reason (e.g. ImagePullBackOff) and its "
            "message, and its pods are cleaned up under runPolicy.cleanPodPolicy, so no "
            "GPUs are held by pods that cannot start. Wait: the job keeps waiting (for an "
            "image to be pushed or a ConfigMap to be created), with the Running condition "
            "saying what it waits for."
        ),
    )
