{{/*
Names. With the release named "tock" the objects have the Kustomize base's names (tock-scheduler,
tock-settings, ...). Truncated to 48 so the longest suffix ("-asset-watcher") still fits 63.
*/}}
{{- define "tock.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 48 | trimSuffix "-" -}}
{{- end -}}

{{- define "tock.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 48 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 48 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 48 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; call with (list $ "<component>"). */}}
{{- define "tock.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "tock.selectorLabels" . }}
app.kubernetes.io/part-of: tock
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
{{- end -}}

{{- define "tock.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "tock.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "tock.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "tock.settingsName" -}}{{ include "tock.fullname" . }}-settings{{- end -}}
{{- define "tock.kubeconfigName" -}}{{ include "tock.fullname" . }}-kubeconfig{{- end -}}
{{- define "tock.secretName" -}}
{{- default (printf "%s-secrets" (include "tock.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}
{{- define "tock.serviceAccountName" -}}
{{- default (printf "%s-scheduler" (include "tock.fullname" .)) .Values.serviceAccount.name -}}
{{- end -}}
{{- define "tock.kafkaName" -}}{{ include "tock.fullname" . }}-kafka{{- end -}}

{{/* TOCK_HOME: the emptyDir every Tock container mounts. */}}
{{- define "tock.home" -}}/var/lib/tock{{- end -}}

{{/* TOCK_KAFKA_BOOTSTRAP: the in-cluster Kafka's Service when enabled, else kafka.bootstrapServers. */}}
{{- define "tock.kafkaBootstrap" -}}
{{- if .Values.kafka.inCluster.enabled -}}
{{- printf "%s.%s.svc:9092" (include "tock.kafkaName" .) .Release.Namespace -}}
{{- else -}}
{{- .Values.kafka.bootstrapServers -}}
{{- end -}}
{{- end -}}

{{/*
The settings ConfigMap's data: the settings the chart derives from its values, then .Values.settings
(whose names the schema limits to the other TOCK_* settings, so none is set twice).
*/}}
{{- define "tock.settings" -}}
{{- $metricsPort := .Values.metrics.port | int | toString -}}
{{- $settings := dict
      "TOCK_HOME" (include "tock.home" .)
      "TOCK_KAFKA_BOOTSTRAP" (include "tock.kafkaBootstrap" .)
      "TOCK_CELERY_BROKER_URL" .Values.celery.brokerUrl
      "TOCK_KUBECONFIG" "/etc/tock/kubeconfig/kubeconfig"
      "TOCK_KUBE_IMAGE" (default (include "tock.image" .) .Values.kubernetesExecutor.image)
      "TOCK_API_HOST" "0.0.0.0"
      "TOCK_API_PORT" (.Values.api.port | int | toString)
      "TOCK_MONITOR_HOST" "127.0.0.1"
      "TOCK_MONITOR_PORT" (.Values.monitor.port | int | toString)
      "TOCK_METRICS_HOST" "0.0.0.0"
      "TOCK_SCHEDULER_METRICS_PORT" $metricsPort
      "TOCK_DAG_PROCESSOR_METRICS_PORT" $metricsPort
      "TOCK_PROJECTOR_METRICS_PORT" $metricsPort -}}
{{- range $key, $value := .Values.settings -}}
{{- /* A whole number from a values file arrives as float64: written as one, not as 1.048576e+07. */ -}}
{{- if and (kindIs "float64" $value) (eq $value (floor $value)) -}}
{{- $value = $value | int64 -}}
{{- end -}}
{{- $_ := set $settings $key (toString $value) -}}
{{- end -}}
{{- range $key := keys $settings | sortAlpha }}
{{ $key }}: {{ get $settings $key | quote }}
{{- end -}}
{{- end -}}

{{/* Pod annotations; call with (list $ <component values> <serves metrics>). */}}
{{- define "tock.podAnnotations" -}}
{{- $root := index . 0 -}}
{{- $annotations := merge (dict) ((index . 1).podAnnotations | default dict) ($root.Values.podAnnotations | default dict) -}}
{{- $_ := set $annotations "checksum/settings" (include "tock.settings" $root | sha256sum) -}}
{{- if and (index . 2) $root.Values.metrics.scrapeAnnotations -}}
{{- $_ := set $annotations "prometheus.io/scrape" "true" -}}
{{- $_ := set $annotations "prometheus.io/port" ($root.Values.metrics.port | int | toString) -}}
{{- $_ := set $annotations "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- toYaml $annotations -}}
{{- end -}}

{{/*
What every Tock pod spec shares, after its containers: security, scheduling (a component's own
nodeSelector / tolerations / affinity, else the chart-wide ones) and the home and /tmp volumes.
Call with (list $ <component values>).
*/}}
{{- define "tock.podCommon" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
terminationGracePeriodSeconds: {{ $component.terminationGracePeriodSeconds }}
securityContext:
  {{- toYaml $root.Values.podSecurityContext | nindent 2 }}
{{- with $root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.nodeSelector | default $root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.tolerations | default $root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $component.affinity | default $root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "tock.volumes" -}}
- {name: home, emptyDir: {}}
- {name: tmp, emptyDir: {}}
{{- end -}}

{{/* A Tock container's image, security and mounts (home, /tmp); call with $. */}}
{{- define "tock.containerCommon" -}}
image: {{ include "tock.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
volumeMounts:
  - {name: home, mountPath: {{ include "tock.home" . }}}
  - {name: tmp, mountPath: /tmp}
{{- end -}}

{{/* envFrom: the settings, and the secrets when the service reads them; call with (list $ <with secrets>). */}}
{{- define "tock.envFrom" -}}
{{- $root := index . 0 -}}
envFrom:
  - configMapRef: {name: {{ include "tock.settingsName" $root }}}
{{- if index . 1 }}
  - secretRef: {name: {{ include "tock.secretName" $root }}}
{{- end }}
{{- end -}}

{{/* A container's probes and resources, probes through `tpl`; call with (list $ <component values>). */}}
{{- define "tock.probesAndResources" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- with $component.livenessProbe }}
livenessProbe:
  {{- tpl (toYaml .) $root | nindent 2 }}
{{- end }}
{{- with $component.readinessProbe }}
readinessProbe:
  {{- tpl (toYaml .) $root | nindent 2 }}
{{- end }}
resources:
  {{- toYaml $component.resources | nindent 2 }}
{{- end -}}
