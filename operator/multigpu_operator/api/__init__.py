"""The MultiGPUJob API: its typed declaration, the CRD generated from it, offline
validation against that CRD, and the names and labels of what a job creates."""
