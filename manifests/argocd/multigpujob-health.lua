-- Argo CD health of a MultiGPUJob (multigpu.dev/v1alpha1), from the status the operator
-- writes. A job that finished successfully is Healthy, like a batch/v1 Job; a running one
-- is Healthy too, so an Application that holds long training jobs is not stuck Progressing.
-- docs/gitops.md shows how to install it; tests/unit/test_chart_argocd_health.py runs it.
local hs = {}

local function condition(status, type)
  if status.conditions ~= nil then
    for _, c in ipairs(status.conditions) do
      if c.type == type then
        return c
      end
    end
  end
  return nil
end

local function message_of(status, type, fallback)
  local c = condition(status, type)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report the job's status"
  return hs
end

-- A status written for an older spec says nothing about the current one yet.
local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
  return hs
end

local phase = status.phase
if phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = message_of(status, "Succeeded", "Job succeeded")
elseif phase == "Running" then
  hs.status = "Healthy"
  hs.message = message_of(status, "Running", "All pods are running")
elseif phase == "Failed" then
  hs.status = "Degraded"
  hs.message = message_of(status, "Failed", "Job failed")
elseif phase == "Suspended" then
  hs.status = "Suspended"
  hs.message = message_of(status, "Suspended", "Job is suspended")
elseif phase == "Restarting" then
  hs.status = "Progressing"
  hs.message = message_of(status, "Restarting", "Restarting after a failure")
elseif phase == "Pending" then
  hs.status = "Progressing"
  local scheduled = condition(status, "Scheduled")
  if scheduled ~= nil and scheduled.status == "False" and scheduled.message ~= nil then
    hs.message = scheduled.message
  else
    hs.message = "Waiting for the job's pods to run"
  end
else
  hs.status = "Unknown"
  hs.message = "Unknown phase " .. tostring(phase)
end
return hs
