{{/*
Helpers of the humanwork-operator chart: labels and image references.
*/}}

{{/* The labels every object of one component carries (the kustomize base's). */}}
{{- define "humanwork.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/part-of: humanwork
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end -}}

{{/* An image reference: repository@digest when a digest is set, else repository:tag. */}}
{{- define "humanwork.image" -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ .tag }}
{{- end -}}
{{- end -}}

{{/* The name of a cluster-scoped object, or of one outside the release's namespace. */}}
{{- define "humanwork.clusterName" -}}
{{ .root.Values.clusterResourcePrefix }}{{ .name }}
{{- end -}}

{{/* "true" when the platform server migrates at its start (no migrations init container). */}}
{{- define "humanwork.migrateOnStart" -}}
{{- if and .Values.platform.migrations.initContainer (not .Values.database.embedded.enabled) -}}
false
{{- else -}}
true
{{- end -}}
{{- end -}}

{{/* The hardened container security context every humanwork container runs with. */}}
{{- define "humanwork.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
{{- end -}}
