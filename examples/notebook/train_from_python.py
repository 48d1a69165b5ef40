# %% [markdown]
# # Train from Python
#
# A MultiGPUJob created, watched, read and deleted from Python with
# `multigpu_operator.client`, on the cluster of your kubeconfig's current context. VS Code
# and Jupyter (with jupytext) open this file as a notebook, cell by cell; it also runs as a
# script: `python examples/notebook/train_from_python.py`.
#
# Settings come from the environment, so that the same file runs on any cluster (the
# project's tests run it on the local one):
#
# - `MGJ_EXAMPLE_NAMESPACE`: the namespace (default: the kubeconfig context's)
# - `MGJ_EXAMPLE_IMAGE`: the trainer image
# - `MGJ_EXAMPLE_POD`: JSON merged into the pod spec, e.g. a nodeSelector and tolerations

# %%
import asyncio
import json
import os

from multigpu_operator.api.status import Phase
from multigpu_operator.client import AsyncClient, Client, JobEnded

NAMESPACE = os.environ.get("MGJ_EXAMPLE_NAMESPACE")  # None: the kubeconfig context's
IMAGE = os.environ.get("MGJ_EXAMPLE_IMAGE", "ghcr.io/multigpu-operator/trainer:0.1.0")
POD = json.loads(os.environ.get("MGJ_EXAMPLE_POD", "{}"))

jobs = Client(namespace=NAMESPACE)

# %% [markdown]
# ## A job from a dict
#
# DistributedDataParallel on CPU: two pods of one process each, on the gloo backend,
# training the trainer image's small model for two epochs. `generateName` gives each run
# of the notebook a job of its own; `create` returns the name the API server chose.

# %%
trainer = {
    "name": "trainer",
    "image": IMAGE,
    "command": ["torchrun", "-m", "multigpu_train.ddp"],
    "args": ["--epochs", "2"],
    "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}},
}
job = {
    "apiVersion": "multigpu.dev/v1alpha1",
    "kind": "MultiGPUJob",
    "metadata": {"generateName": "notebook-ddp-"},
    "spec": {
        "mode": "DistributedDataParallel",
        "replicas": 2,
        "gpusPerReplica": 0,
        "template": {"spec": {**POD, "containers": [trainer]}},
    },
}
name = jobs.create(job)
print(f"created {name}")

# %% [markdown]
# ## Running: where its pods are

# %%
jobs.wait(name, Phase.RUNNING, timeout=300)
for pod in jobs.get(name).pods:
    print(f"replica {pod.replica}: {pod.name} on {pod.node}, {pod.state}")

# %% [markdown]
# ## Every rank's log, as it comes
#
# Each line is prefixed with its pod and replica index. Following ends once the job has
# ended (a retry's pods are followed too).

# %%
for line in jobs.logs(name, follow=True):
    print(line)

# %% [markdown]
# ## How it ended

# %%
try:
    status = jobs.wait(name, timeout=600)
    print(f"{name} {status.phase}: {status.pods.succeeded if status.pods else 0} pods succeeded")
except JobEnded as ended:
    print(f"{name} {ended.status.phase}: {ended.status.last_failure}")

# %% [markdown]
# ## The same in async form
#
# `AsyncClient` has the same methods, awaited: here the job, its events and its logs are
# read at once.


# %%
async def summary(name: str) -> None:
    async with AsyncClient(namespace=NAMESPACE) as aio:
        view, events = await asyncio.gather(aio.get(name), aio.events(name))
        print(f"{view.name}: {view.phase}, attempt {view.status.attempt}")
        for event in events:
            print(f"  event {event.get('reason')}: {event.get('note')}")
        lines = [line async for line in aio.logs(name, replica=0)]
        print(f"  rank 0's last line: {lines[-1] if lines else '-'}")


try:
    asyncio.get_running_loop()
except RuntimeError:  # a script: no event loop runs yet
    asyncio.run(summary(name))
else:  # Jupyter runs one already: there, write `await summary(name)` in a cell
    print("await summary(name) to see the summary")

# %% [markdown]
# ## Clean up: the job and its pods

# %%
jobs.delete(name)
print(f"{name} deleted")
