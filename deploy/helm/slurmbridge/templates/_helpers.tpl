{{- define "slurmbridge.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "slurmbridge.labels" -}}
app.kubernetes.io/name: slurmbridge
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "slurmbridge.selectorLabels" -}}
app.kubernetes.io/name: slurmbridge
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "slurmbridge.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
The Deployments to render: name suffix → {only, replicas, resources}. all-in-one: one
("" suffix) running every component; per-component: values.components, plus the webhook.
*/}}
{{- define "slurmbridge.groups" -}}
{{- $groups := dict -}}
{{- if eq .Values.layout "all-in-one" -}}
{{- $only := list -}}
{{- range $name, $c := .Values.components -}}
{{- $only = concat $only $c.only -}}
{{- end -}}
{{- if .Values.webhook.enabled -}}
{{- $only = append $only "webhook" -}}
{{- end -}}
{{- $_ := set $groups "all" (dict "only" $only "replicas" .Values.allInOne.replicas "resources" .Values.allInOne.resources) -}}
{{- else if eq .Values.layout "per-component" -}}
{{- range $name, $c := .Values.components -}}
{{- $_ := set $groups $name $c -}}
{{- end -}}
{{- if .Values.webhook.enabled -}}
{{- $_ := set $groups "webhook" (dict "only" (list "webhook") "replicas" .Values.webhook.replicas "resources" .Values.webhook.resources) -}}
{{- end -}}
{{- else -}}
{{- fail (printf "layout: %q is not all-in-one or per-component" .Values.layout) -}}
{{- end -}}
{{- toYaml $groups -}}
{{- end -}}

{{/* The name of a group's objects: the release's for all-in-one, with the suffix otherwise. */}}
{{- define "slurmbridge.groupName" -}}
{{- if eq .group "all" -}}
{{ include "slurmbridge.fullname" .root }}
{{- else -}}
{{ include "slurmbridge.fullname" .root }}-{{ .group }}
{{- end -}}
{{- end -}}

{{/* The RBAC rules of a group: the union of files/rbac.yaml's rules of its components. */}}
{{- define "slurmbridge.rules" -}}
{{- $table := .root.Files.Get "files/rbac.yaml" | fromYaml -}}
{{- $rules := list -}}
{{- range $c := .only -}}
{{- if not (hasKey $table $c) -}}
{{- fail (printf "files/rbac.yaml has no entry for component %q" $c) -}}
{{- end -}}
{{- $rules = concat $rules (get $table $c) -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/* The service account the webhook lets change the job-id label of bound pods: placement's. */}}
{{- define "slurmbridge.placementServiceAccount" -}}
{{- if eq .Values.layout "per-component" -}}
{{ include "slurmbridge.fullname" . }}-placement
{{- else -}}
{{ include "slurmbridge.fullname" . }}
{{- end -}}
{{- end -}}
