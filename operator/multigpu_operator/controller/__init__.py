"""The controller: the job cache and its workers (workers.py), the de-duplicating work
queue they drain (workqueue.py), one pass of a job (job_pass.py: its inputs from the
caches, the pure pass, the Decision handed to the actuator) and the plan cache that
keeps planning big jobs off the event loop (plan_cache.py)."""
