{{/* The release's full name: "<release>-multigpu-operator", or the release name when it
already contains the chart name (a release called multigpu-operator gives multigpu-operator). */}}
{{- define "mgj.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selects the operator pod; never changes across upgrades (selectors are immutable). */}}
{{- define "mgj.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "mgj.labels" -}}
{{ include "mgj.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "mgj.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "mgj.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "mgj.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "mgj.metricsServiceName" -}}
{{- printf "%s-metrics" (include "mgj.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "mgj.leaseName" -}}
{{- default (include "mgj.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}
