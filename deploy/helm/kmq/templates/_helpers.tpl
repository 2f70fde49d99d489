{{/* The release's base name: the release name, with the chart's name appended unless it holds it already. */}}
{{- define "kmq.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Selector labels: stable (selectors are immutable), never a version. Pass (dict "ctx" $ "component" "tracker"). */}}
{{- define "kmq.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end -}}

{{/* Every object's labels: the selector labels plus the chart's. */}}
{{- define "kmq.labels" -}}
{{ include "kmq.selectorLabels" . }}
app.kubernetes.io/part-of: kmq
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version }}
{{- end -}}

{{- define "kmq.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "kmq.secretName" -}}
{{ .Values.secrets.existingSecret | default (printf "%s-secrets" (include "kmq.fullname" .)) }}
{{- end -}}

{{/* Rolls the pods when the settings change (a ConfigMap or Secret change alone restarts nothing). */}}
{{- define "kmq.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end -}}

{{/* The Kafka security files, as volumes and mounts; absent when not configured. */}}
{{- define "kmq.kafkaVolumes" -}}
{{- with .Values.kafka.security.caSecret.name }}
- name: kafka-ca
  secret:
    secretName: {{ . }}
{{- end }}
{{- with .Values.kafka.security.passwordSecret.name }}
- name: kafka-user
  secret:
    secretName: {{ . }}
{{- end }}
{{- end -}}

{{- define "kmq.kafkaMounts" -}}
{{- if .Values.kafka.security.caSecret.name }}
- name: kafka-ca
  mountPath: /etc/kmq/kafka-ca
  readOnly: true
{{- end }}
{{- if .Values.kafka.security.passwordSecret.name }}
- name: kafka-user
  mountPath: /etc/kmq/kafka-user
  readOnly: true
{{- end }}
{{- end -}}

{{/* The pods' common spec parts: service account, security, pull secrets. */}}
{{- define "kmq.podCommon" -}}
serviceAccountName: {{ include "kmq.fullname" . }}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
