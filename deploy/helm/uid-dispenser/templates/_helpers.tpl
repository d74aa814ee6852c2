{{/* Name of the chart's objects: the release name, with the chart's name unless it contains it. */}}
{{- define "uid-dispenser.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "uid-dispenser.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "uid-dispenser.selectorLabels" -}}
app.kubernetes.io/name: {{ include "uid-dispenser.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "uid-dispenser.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "uid-dispenser.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "uid-dispenser.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "uid-dispenser.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The DISPENSER_* variable of each key of .Values.config (values.schema.json
allows exactly these keys; the chart's test checks every name against the
dispenser's own list).
*/}}
{{- define "uid-dispenser.configVariables" -}}
layout: LAYOUT
workerMode: WORKER_MODE
leaseTTL: LEASE_TTL
reserveChunk: RESERVE_CHUNK
maxLanes: MAX_LANES
laneIdle: LANE_IDLE
boostPower: BOOST_POWER
ringMemory: RING_MEMORY
paddingFactor: PADDING_FACTOR
scheduleInterval: SCHEDULE_INTERVAL
maxAhead: MAX_AHEAD
takeWait: TAKE_WAIT
maxLag: MAX_LAG
queueGroup: QUEUE_GROUP
subjectPrefix: SUBJECT_PREFIX
maxBatch: MAX_BATCH
shutdownTimeout: SHUTDOWN_TIMEOUT
logLevel: LOG_LEVEL
logFormat: LOG_FORMAT
runwayWarning: RUNWAY_WARNING
natsConnectTimeout: NATS_CONNECT_TIMEOUT
storeStartupDeadline: STORE_STARTUP_DEADLINE
sequences: SEQUENCES
sequenceStep: SEQUENCE_STEP
sequenceMaxStep: SEQUENCE_MAX_STEP
sequenceTarget: SEQUENCE_TARGET
createTables: CREATE_TABLES
workerNodeTable: WORKER_NODE_TABLE
workerLeaseTable: WORKER_LEASE_TABLE
fleetTable: FLEET_TABLE
sequenceTable: SEQUENCE_TABLE
workerKVBucket: WORKER_KV_BUCKET
region: REGION
regions: REGIONS
workerKVReplicas: WORKER_KV_REPLICAS
blocksEnabled: BLOCKS_ENABLED
blocksStream: BLOCKS_STREAM
blocksSubject: BLOCKS_SUBJECT
blocksBlockSize: BLOCKS_BLOCK_SIZE
blocksTargetDepth: BLOCKS_TARGET_DEPTH
blocksStorage: BLOCKS_STORAGE
blocksReplicas: BLOCKS_REPLICAS
blocksDuplicateWindow: BLOCKS_DUPLICATE_WINDOW
blocksPollInterval: BLOCKS_POLL_INTERVAL
{{- end -}}

{{/* secretEnv is an env entry named .name read from key .key of Secret .secret. */}}
{{- define "uid-dispenser.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secret }}
      key: {{ .key }}
{{- end -}}
