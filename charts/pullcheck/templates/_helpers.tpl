{{/* Names ------------------------------------------------------------------------ */}}

{{- define "pullcheck.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* RELEASE-pullcheck, or RELEASE when it already says pullcheck; at most 52 characters so
suffixes (-tls, -ca, -prepull) stay within 63. */}}
{{- define "pullcheck.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pullcheck.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pullcheck.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pullcheck.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pullcheck.labels" -}}
helm.sh/chart: {{ include "pullcheck.chart" . }}
{{ include "pullcheck.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pullcheck.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pullcheck.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pullcheck.tlsSecretName" -}}
{{- default (printf "%s-tls" (include "pullcheck.fullname" .)) .Values.tls.secretName }}
{{- end }}

{{/* Images ----------------------------------------------------------------------- */}}

{{/* No default: the project publishes no image, and a placeholder would leave every
injected pod in Init:ImagePullBackOff. */}}
{{- define "pullcheck.image" -}}
{{- $_ := required "image.repository is required: pullcheck publishes no image; build and push yours with scripts/publish-image.sh REGISTRY/REPO[:TAG] and pass the --set image.repository=... --set image.digest=... it prints" .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "pullcheck.injectImage" -}}
{{- if .Values.inject.image }}
{{- .Values.inject.image }}
{{- else }}
{{- include "pullcheck.image" . }}
{{- end }}
{{- end }}

{{/* Webhook ---------------------------------------------------------------------- */}}

{{/* --budget: budgetSeconds, else timeoutSeconds - 2 (at least 1). */}}
{{- define "pullcheck.budget" -}}
{{- if .Values.webhook.budgetSeconds }}
{{- .Values.webhook.budgetSeconds }}
{{- else }}
{{- max 1 (sub (int .Values.webhook.timeoutSeconds) 2) }}
{{- end }}
{{- end }}

{{/* The host of webhook.url (no scheme, port or path), or "". */}}
{{- define "pullcheck.urlHost" -}}
{{- if .Values.webhook.url }}
{{- $u := urlParse .Values.webhook.url }}
{{- $host := get $u "host" }}
{{- if hasPrefix "[" $host }}
{{- $host | trimPrefix "[" | splitList "]" | first }}
{{- else }}
{{- $host | splitList ":" | first }}
{{- end }}
{{- end }}
{{- end }}

{{/* DNS names of the serving certificate: the Service names, the URL's host when it is a
name, tls.extraDNSNames. As a JSON list. */}}
{{- define "pullcheck.certDNSNames" -}}
{{- $svc := include "pullcheck.fullname" . }}
{{- $ns := .Release.Namespace }}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) }}
{{- $host := include "pullcheck.urlHost" . }}
{{- if and $host (not (regexMatch "^[0-9.]+$|:" $host)) }}
{{- $names = append $names $host }}
{{- end }}
{{- concat $names .Values.tls.extraDNSNames | uniq | toJson }}
{{- end }}

{{/* IP addresses of the serving certificate: the URL's host when it is an IP literal,
tls.extraIPs. As a JSON list. */}}
{{- define "pullcheck.certIPs" -}}
{{- $ips := list }}
{{- $host := include "pullcheck.urlHost" . }}
{{- if and $host (regexMatch "^[0-9.]+$|:" $host) }}
{{- $ips = append $ips $host }}
{{- end }}
{{- concat $ips .Values.tls.extraIPs | uniq | toJson }}
{{- end }}

{{/* The generated CA and serving certificate, computed once per render and shared by the
Secret and both webhook configurations (they must agree). An existing Secret with all
three keys is kept, so upgrades don't rotate the CA under the API server. Returns a JSON
object {ca, crt, key} of PEM text. */}}
{{- define "pullcheck.generatedTLS" -}}
{{- if not (hasKey .Release "pullcheckGeneratedTLS") }}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "pullcheck.tlsSecretName" .) }}
{{- $data := dict }}
{{- if $secret }}{{- $data = default (dict) $secret.data }}{{- end }}
{{- $tls := dict }}
{{- if and (hasKey $data "ca.crt") (hasKey $data "tls.crt") (hasKey $data "tls.key") }}
{{- $tls = dict "ca" (index $data "ca.crt" | b64dec) "crt" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec) }}
{{- else }}
{{- $days := int .Values.tls.validityDays }}
{{- $ca := genCA (printf "%s-ca" (include "pullcheck.fullname" .)) $days }}
{{- $dns := include "pullcheck.certDNSNames" . | fromJsonArray }}
{{- $ips := include "pullcheck.certIPs" . | fromJsonArray }}
{{- $cert := genSignedCert (first $dns) $ips $dns $days $ca }}
{{- $tls = dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key }}
{{- end }}
{{- $_ := set .Release "pullcheckGeneratedTLS" $tls }}
{{- end }}
{{- get .Release "pullcheckGeneratedTLS" | toJson }}
{{- end }}

{{/* caBundle field value (base64) for generate and external modes; "" for certManager. */}}
{{- define "pullcheck.caBundle" -}}
{{- if eq .Values.tls.mode "generate" }}
{{- (include "pullcheck.generatedTLS" . | fromJson).ca | b64enc }}
{{- else if eq .Values.tls.mode "external" }}
{{- required "tls.caBundle is required when tls.mode is external" .Values.tls.caBundle | b64enc }}
{{- end }}
{{- end }}

{{/* Namespaces never sent to the webhook. */}}
{{- define "pullcheck.excludedNamespaces" -}}
{{- concat (list .Release.Namespace "kube-system") .Values.webhook.excludeNamespaces | uniq | toJson }}
{{- end }}

{{/* The parts shared by the validating and the mutating webhook. Argument: (dict "root" $
"path" "/validate"). */}}
{{- define "pullcheck.webhookCommon" -}}
{{- $root := .root }}
{{- $v := $root.Values.webhook }}
admissionReviewVersions: ["v1"]
sideEffects: None
failurePolicy: {{ $v.failurePolicy }}
timeoutSeconds: {{ int $v.timeoutSeconds }}
matchPolicy: Equivalent
clientConfig:
  {{- if $v.url }}
  url: {{ printf "%s%s" (trimSuffix "/" $v.url) .path | quote }}
  {{- else }}
  service:
    name: {{ include "pullcheck.fullname" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ .path }}
    port: {{ int $root.Values.service.port }}
  {{- end }}
  {{- $ca := include "pullcheck.caBundle" $root }}
  {{- if $ca }}
  caBundle: {{ $ca }}
  {{- end }}
namespaceSelector:
  {{- with $v.namespaceSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        {{- include "pullcheck.excludedNamespaces" $root | fromJsonArray | toYaml | nindent 8 }}
    {{- with $v.namespaceSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- if or $v.skipControllerOwned $v.skipAnnotated }}
matchConditions:
  {{- if $v.skipControllerOwned }}
  - name: not-controller-owned
    expression: "!has(object.metadata.ownerReferences) || !object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)"
  {{- end }}
  {{- if $v.skipAnnotated }}
  - name: not-opted-out
    expression: "!has(object.metadata.annotations) || !('pullcheck.io/skip' in object.metadata.annotations) || object.metadata.annotations['pullcheck.io/skip'] != 'true'"
  {{- end }}
{{- end }}
rules:
  - apiGroups: ["batch"]
    apiVersions: ["v1"]
    resources: ["jobs"]
    operations: ["CREATE"]
    scope: Namespaced
  - apiGroups: ["batch"]
    apiVersions: ["v1"]
    resources: ["cronjobs"]
    operations: ["CREATE", "UPDATE"]
    scope: Namespaced
  - apiGroups: ["kubeflow.org"]
    apiVersions: ["*"]
    resources: ["pytorchjobs", "tfjobs", "mpijobs", "xgboostjobs", "paddlejobs", "jaxjobs"]
    operations: ["CREATE"]
    scope: Namespaced
  - apiGroups: ["jobset.x-k8s.io"]
    apiVersions: ["*"]
    resources: ["jobsets"]
    operations: ["CREATE"]
    scope: Namespaced
  {{- if eq .path "/validate" }}
  {{- /* Checked at CREATE on its runtime's templates, never mutated: the trainer builds
         the JobSet from it (docs/webhook.md, TrainJobs). */}}
  - apiGroups: ["trainer.kubeflow.org"]
    apiVersions: ["v1alpha1"]
    resources: ["trainjobs"]
    operations: ["CREATE"]
    scope: Namespaced
  {{- end }}
  {{- range $v.extraKinds }}
  {{- $gv := splitList "/" .apiVersion }}
  {{- if eq (len $gv) 2 }}
  - apiGroups: [{{ first $gv | quote }}]
    apiVersions: [{{ last $gv | quote }}]
  {{- else if contains "." .apiVersion }}
  - apiGroups: [{{ .apiVersion | quote }}]
    apiVersions: ["*"]
  {{- else }}
  - apiGroups: [""]
    apiVersions: [{{ .apiVersion | quote }}]
  {{- end }}
    resources: [{{ required "webhook.extraKinds[].resource (the plural, e.g. rayjobs) is required" .resource | quote }}]
    operations: {{ default (list "CREATE") .operations | toJson }}
    scope: Namespaced
  {{- end }}
{{- end }}

{{/* ConfigMap key for a registry host (keys allow [-._a-zA-Z0-9]; a host may carry a
port or IPv6 brackets): "registry:5000" → "registry_5000". */}}
{{- define "pullcheck.hostKey" -}}
{{- regexReplaceAll "[^-._a-zA-Z0-9]" . "_" }}
{{- end }}

{{/* Credential providers --------------------------------------------------------- */}}

{{/* Where the plugins are run from: an emptyDir the copy init container fills. */}}
{{- define "pullcheck.providerBinDir" -}}
/credential-providers/bin
{{- end }}

{{/* Where the CredentialProviderConfig ConfigMap is mounted. */}}
{{- define "pullcheck.providerConfigDir" -}}
/etc/pullcheck/credential-providers
{{- end }}

{{/* Fails the render on inconsistent credentialProviders values; renders nothing. */}}
{{- define "pullcheck.validateProviders" -}}
{{- $c := .Values.credentialProviders }}
{{- if $c.enabled }}
{{- if not $c.config }}
{{- fail "credentialProviders.config is empty: give the CredentialProviderConfig (as on the nodes, paths in args changed to the webhook pod's)" }}
{{- end }}
{{- if hasKey $c.files "config.yaml" }}
{{- fail "credentialProviders.files: config.yaml is the name of the CredentialProviderConfig itself; pick another file name" }}
{{- end }}
{{- end }}
{{- if $c.tokenRequests.enabled }}
{{- if not $c.enabled }}
{{- fail "credentialProviders.tokenRequests.enabled needs credentialProviders.enabled" }}
{{- end }}
{{- if not $c.tokenRequests.namespaces }}
{{- fail "credentialProviders.tokenRequests.namespaces is empty: list the namespaces the webhook may request ServiceAccount tokens in" }}
{{- end }}
{{- if not $c.tokenRequests.audiences }}
{{- fail "credentialProviders.tokenRequests.audiences is empty: list the serviceAccountTokenAudience of each token-mode provider" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pullcheck.pluginImage" -}}
{{- $i := .Values.credentialProviders.pluginImage }}
{{- $repo := required "credentialProviders.pluginImage.repository is empty: the image holding the plugin binaries" $i.repository }}
{{- if $i.digest }}
{{- printf "%s@%s" $repo $i.digest }}
{{- else }}
{{- printf "%s:%s" $repo (required "credentialProviders.pluginImage.tag (or .digest) is empty" $i.tag) }}
{{- end }}
{{- end }}

{{/* The copy init container's command, as a JSON list. */}}
{{- define "pullcheck.pluginCopyCommand" -}}
{{- $c := .Values.credentialProviders }}
{{- if $c.copyCommand }}
{{- toJson $c.copyCommand }}
{{- else }}
{{- list "cp" "-a" (printf "%s/." (trimSuffix "/" $c.pluginPath)) (printf "%s/" (include "pullcheck.providerBinDir" .)) | toJson }}
{{- end }}
{{- end }}

{{/* "true" when the webhook dry-runs the restart-rules probe Pod: transient Auto or
Restart, inject.restartRulesProbe on, and Kubernetes 1.35 or later (the webhook probes only
there; ValidatingAdmissionPolicy v1, which keeps the probe's permission to dry runs, is 1.30). */}}
{{- define "pullcheck.restartRulesProbe" -}}
{{- if and .Values.webhook.enabled .Values.inject.restartRulesProbe (has (lower .Values.inject.transient) (list "auto" "restart")) (semverCompare ">=1.35.0-0" .Capabilities.KubeVersion.Version) -}}
true
{{- end -}}
{{- end }}

{{/* The username the API server gives the webhook's ServiceAccount. */}}
{{- define "pullcheck.serviceAccountUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "pullcheck.serviceAccountName" .) }}
{{- end }}

{{/* The watch ---------------------------------------------------------------------- */}}

{{/* Its own name label, so the webhook's Service, PodDisruptionBudget and spread
constraints (which select on pullcheck.selectorLabels) never pick the watch's pods. */}}
{{- define "pullcheck.watchSelectorLabels" -}}
app.kubernetes.io/name: {{ include "pullcheck.name" . }}-watch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: watch
{{- end }}

{{- define "pullcheck.watchLabels" -}}
helm.sh/chart: {{ include "pullcheck.chart" . }}
{{ include "pullcheck.watchSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pullcheck.watchServiceAccountName" -}}
{{- if .Values.watch.serviceAccount.create }}
{{- default (printf "%s-watch" (include "pullcheck.fullname" .)) .Values.watch.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.watch.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pullcheck.auditSelectorLabels" -}}
app.kubernetes.io/name: {{ include "pullcheck.name" . }}-audit
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: audit
{{- end }}

{{- define "pullcheck.auditLabels" -}}
helm.sh/chart: {{ include "pullcheck.chart" . }}
{{ include "pullcheck.auditSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pullcheck.auditServiceAccountName" -}}
{{- if .Values.audit.serviceAccount.create }}
{{- default (printf "%s-audit" (include "pullcheck.fullname" .)) .Values.audit.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.audit.serviceAccount.name }}
{{- end }}
{{- end }}
