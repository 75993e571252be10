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

{{/*
The RBAC rules of a group: the union of files/rbac.yaml's rules of its components, one rule per
(apiGroup, resource) with the union of its verbs, split into "cluster" (the ClusterRole) and
"namespaced" (a Role in each of rbac.clusterSecretNamespaces). A rule with `onlyWith: <values
path>` is granted only when that value is set.
*/}}
{{- define "slurmbridge.rules" -}}
{{- $table := .root.Files.Get "files/rbac.yaml" | fromYaml -}}
{{- $verbs := dict "cluster" dict "namespaced" dict -}}
{{- range $c := .only -}}
{{- if not (hasKey $table $c) -}}
{{- fail (printf "files/rbac.yaml has no entry for component %q" $c) -}}
{{- end -}}
{{- range $rule := get $table $c -}}
{{- $wanted := true -}}
{{- with $rule.onlyWith -}}
{{- $v := $.root.Values -}}
{{- range $part := splitList "." . -}}
{{- $v = get ($v | default dict) $part -}}
{{- end -}}
{{- $wanted = not (empty $v) -}}
{{- end -}}
{{- if $wanted -}}
{{- $scope := get $verbs (ternary "namespaced" "cluster" (default false $rule.namespaced)) -}}
{{- range $g := $rule.apiGroups -}}
{{- range $r := $rule.resources -}}
{{- $key := printf "%s|%s" $g $r -}}
{{- $_ := set $scope $key (concat (get $scope $key | default list) $rule.verbs | uniq) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $out := dict -}}
{{- range $scope, $byKey := $verbs -}}
{{- $rules := list -}}
{{- range $key := keys $byKey | sortAlpha -}}
{{- $gr := splitList "|" $key -}}
{{- $rules = append $rules (dict "apiGroups" (list (index $gr 0)) "resources" (list (index $gr 1)) "verbs" (get $byKey $key | sortAlpha)) -}}
{{- end -}}
{{- $_ := set $out $scope $rules -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The namespaces of the Roles of namespaced rules: rbac.clusterSecretNamespaces or the release's. */}}
{{- define "slurmbridge.secretNamespaces" -}}
{{- toYaml (.Values.rbac.clusterSecretNamespaces | default (list .Release.Namespace) | uniq) -}}
{{- end -}}

{{/*
NATS: the official chart's client Service in this release (its nats.fullname logic), or
externalNats.url.
*/}}
{{- define "slurmbridge.natsUrl" -}}
{{- if .Values.nats.enabled -}}
{{- $n := .Values.nats -}}
{{- $name := default "nats" $n.nameOverride -}}
{{- $full := printf "%s-%s" .Release.Name $name -}}
{{- if $n.fullnameOverride -}}
{{- $full = $n.fullnameOverride -}}
{{- else if contains $name .Release.Name -}}
{{- $full = .Release.Name -}}
{{- end -}}
{{- $full = $full | trunc 63 | trimSuffix "-" -}}
{{- with $n.service -}}{{- with .name -}}{{- $full = . -}}{{- end -}}{{- end -}}
nats://{{ $full }}.{{ .Release.Namespace }}.svc:4222
{{- else -}}
{{ required "externalNats.url: set it, or nats.enabled=true" .Values.externalNats.url }}
{{- end -}}
{{- end -}}

{{/* The scheduler name pods of ours carry (config.schedulerName, else slurmbridge's default). */}}
{{- define "slurmbridge.schedulerName" -}}
{{- $name := .Values.config.schedulerName | default "slurm-bridge-scheduler" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" $name) -}}
{{- fail (printf "config.schedulerName: %q is not a DNS subdomain" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* The service account the webhook lets change the job-id label of bound pods: placement's. */}}
{{- define "slurmbridge.placementServiceAccount" -}}
{{- if eq .Values.layout "per-component" -}}
{{ include "slurmbridge.fullname" . }}-placement
{{- else -}}
{{ include "slurmbridge.fullname" . }}
{{- end -}}
{{- end -}}
