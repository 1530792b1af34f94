#!/usr/bin/env bash
# Static checks of the Helm chart charts/pullcheck: `helm lint --strict` and `helm template`
# with the default values and with each option combination, asserting the kinds, counts
# and the fields the webhook's safety depends on (failurePolicy, namespace exclusions,
# matchConditions, TLS wiring, RBAC scope, restricted securityContext, ...).
#
#   scripts/helm-check.sh            # helm from scripts/go-tools.sh (built once, cached)
#   HELM=/path/to/helm scripts/helm-check.sh
#
# Needs python3 with PyYAML (installed with pip when missing) and openssl.
# Exit status 0 when every check passed; the last line is "N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${HELM:-}" ]; then
  HELM="$(scripts/go-tools.sh helm)/helm"
fi
export HELM
if ! python3 -c 'import yaml' 2>/dev/null; then
  echo "helm-check: installing PyYAML" >&2
  python3 -m pip install --quiet pyyaml >&2
fi
command -v openssl >/dev/null || { echo "helm-check: openssl is required" >&2; exit 2; }

exec python3 - "$@" <<'PY'
import base64, json, os, re, subprocess, sys, tempfile
import yaml

HELM = os.environ["HELM"]
CHART = "charts/pullcheck"
NS = "pullcheck-system"
CEL_OWNED = ("!has(object.metadata.ownerReferences) || "
             "!object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller)")
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok    {name}")
    else:
        failed += 1
        print(f"FAIL  {name}{': ' + str(detail) if detail else ''}")


def helm(*args):
    return subprocess.run([HELM, *args], capture_output=True, text=True)


# The chart has no default image (image.repository is required, see the "image" section);
# every other render passes this one first, and a later --set may override it.
REPO = "registry.example.com/mirror/pullcheck"
IMAGE = ["--set", f"image.repository={REPO}"]


def render(*args, release="pc", expect_error=None, probe=False, image=True):
    """helm template → list of documents; None on failure (the error is printed unless it
    contains `expect_error`). The restart-rules probe's Role, RoleBinding and policy are
    left out unless `probe` (their own section checks them), so the other sections count
    only their own RBAC. `image=False` leaves out IMAGE."""
    r = helm("template", release, CHART, "--namespace", NS, *(IMAGE if image else []), *args)
    if r.returncode != 0:
        if not (expect_error and expect_error in r.stderr):
            print(r.stderr, file=sys.stderr)
        return None
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    if not probe:
        docs = [d for d in docs if not d["metadata"]["name"].endswith("-restart-rules-probe")]
    return docs


def kinds(docs):
    out = {}
    for d in docs:
        out[d["kind"]] = out.get(d["kind"], 0) + 1
    return out


def one(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


def openssl(args, stdin):
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, text=True)


# ---- lint ------------------------------------------------------------------------------
LINT_SETS = {
    "defaults": [],
    "certManager": ["--set", "tls.mode=certManager"],
    "external": ["--set", "tls.mode=external", "--set", "tls.caBundle=PEM"],
    "rbac namespaces": ["--set", "rbac.scope=namespaces", "--set", "rbac.namespaces={team-a,team-b}"],
    "prePull + serviceMonitor": ["--set", "prePull.enabled=true", "--set", "serviceMonitor.enabled=true"],
    "watch": ["--set", "watch.enabled=true", "--set", "serviceMonitor.enabled=true"],
    "watch alone": ["--set", "webhook.enabled=false", "--set", "watch.enabled=true"],
    "webhook disabled": ["--set", "webhook.enabled=false"],
    "url mode": ["--set", "webhook.url=https://127.0.0.1:8443"],
    "credential providers with token requests": [
        "--set", "credentialProviders.enabled=true", "--set", "credentialProviders.config=providers: []",
        "--set", "credentialProviders.pluginImage.repository=example.com/plugins",
        "--set", "credentialProviders.pluginImage.tag=v1",
        "--set", "credentialProviders.tokenRequests.enabled=true",
        "--set", "credentialProviders.tokenRequests.namespaces={team-a}",
        "--set", "credentialProviders.tokenRequests.audiences={sts.amazonaws.com}"],
}
for name, extra in LINT_SETS.items():
    r = helm("lint", "--strict", CHART, "--namespace", NS, *IMAGE, *extra)
    check(f"helm lint --strict ({name})", r.returncode == 0, r.stdout + r.stderr)

# ---- image: required, and built for the platforms the chart says the nodes have -------
NEED_IMAGE = "image.repository is required: pullcheck publishes no image; build and push yours with scripts/publish-image.sh"
r = helm("template", "pc", CHART, "--namespace", NS)
check("without image.repository the chart fails to render, naming scripts/publish-image.sh",
      r.returncode != 0 and NEED_IMAGE in r.stderr and r.stdout == "", r.stderr)
r = helm("lint", "--strict", CHART, "--namespace", NS)
# helm lint renders leniently: a missing `required` value is an [INFO] line, not a failure.
check("... and helm lint names it too ([INFO]: lint doesn't fail on required values)",
      f"[INFO] Missing required value: {NEED_IMAGE}" in (r.stdout + r.stderr), r.stdout + r.stderr)
for label, extra in (("watch alone", ["--set", "webhook.enabled=false", "--set", "watch.enabled=true"]),
                     ("inject.image set, webhook image not", ["--set", "inject.image=mirror.example/pullcheck@sha256:" + "b" * 64])):
    r = helm("template", "pc", CHART, "--namespace", NS, *extra)
    check(f"without image.repository ({label}) it fails too", r.returncode != 0 and NEED_IMAGE in r.stderr, r.stderr)
pinned = render("--set", "image.digest=sha256:" + "c" * 64) or []
pdep = next((d for d in pinned if d["kind"] == "Deployment"), {"spec": {"template": {"spec": {"containers": [{}]}}}})
pc = pdep["spec"]["template"]["spec"]["containers"][0]
check("image.digest pins the webhook and the injected image",
      pc.get("image") == f"{REPO}@sha256:" + "c" * 64
      and f"--inject-image={REPO}@sha256:" + "c" * 64 in pc.get("args", []), pc)
# scripts/publish-image.sh's PLATFORMS are what the image holds; the chart's default
# clusterPlatforms must be the same list, or pullcheck calls its own image pullable for a
# node it can't run on (or fails healthy Jobs for a platform the image lacks).
with open("scripts/publish-image.sh") as f:
    m = re.search(r'^platforms=\(([^)]*)\)', f.read(), re.M)
published = sorted("linux/" + p for p in (m.group(1).split() if m else []))
with open(f"{CHART}/values.yaml") as f:
    chart_platforms = sorted(yaml.safe_load(f)["clusterPlatforms"])
check(f"clusterPlatforms {chart_platforms} = the image's platforms {published}",
      published and chart_platforms == published, (chart_platforms, published))

# ---- defaults --------------------------------------------------------------------------
docs = render(probe=True)
check("default render succeeds", docs is not None)
docs = docs or []
k = kinds(docs)
check("default kinds and counts", k == {
    "Deployment": 1, "Service": 1, "ServiceAccount": 1, "ClusterRole": 1,
    "ClusterRoleBinding": 1, "Secret": 1, "PodDisruptionBudget": 1,
    "ValidatingWebhookConfiguration": 1, "MutatingWebhookConfiguration": 1,
    "Role": 1, "RoleBinding": 1, "ValidatingAdmissionPolicy": 1,
    "ValidatingAdmissionPolicyBinding": 1}, k)

vwc = one(docs, "ValidatingWebhookConfiguration")["webhooks"]
mwc = one(docs, "MutatingWebhookConfiguration")["webhooks"]
check("one validating and one mutating webhook", len(vwc) == 1 and len(mwc) == 1)
for label, w in (("validating", vwc[0]), ("mutating", mwc[0])):
    check(f"{label}: failurePolicy Ignore", w["failurePolicy"] == "Ignore", w["failurePolicy"])
    check(f"{label}: timeoutSeconds 10", w["timeoutSeconds"] == 10)
    check(f"{label}: sideEffects None", w["sideEffects"] == "None")
    check(f"{label}: admissionReviewVersions [v1]", w["admissionReviewVersions"] == ["v1"])
    sel = w["namespaceSelector"]
    check(f"{label}: opt-in label", sel.get("matchLabels") == {"pullcheck.io/enabled": "true"}, sel)
    notin = [e for e in sel["matchExpressions"]
             if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "NotIn"]
    check(f"{label}: excludes its namespace and kube-system",
          len(notin) == 1 and set(notin[0]["values"]) >= {NS, "kube-system"}, notin)
    conds = {c["name"]: c["expression"] for c in w.get("matchConditions", [])}
    check(f"{label}: matchCondition skips controller-owned objects",
          conds.get("not-controller-owned") == CEL_OWNED, conds)
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): r for r in w["rules"]}
    check(f"{label}: jobs on CREATE", rules[(("batch",), ("jobs",))]["operations"] == ["CREATE"])
    check(f"{label}: cronjobs on CREATE and UPDATE",
          rules[(("batch",), ("cronjobs",))]["operations"] == ["CREATE", "UPDATE"])
    kf = [r for r in w["rules"] if r["apiGroups"] == ["kubeflow.org"]]
    check(f"{label}: kubeflow job kinds",
          len(kf) == 1 and set(kf[0]["resources"]) == {"pytorchjobs", "tfjobs", "mpijobs",
                                                       "xgboostjobs", "paddlejobs", "jaxjobs"}, kf)
    check(f"{label}: jobsets", (("jobset.x-k8s.io",), ("jobsets",)) in rules)
    check(f"{label}: no pods rule", not any("pods" in r["resources"] for r in w["rules"]))
    svc = w["clientConfig"].get("service", {})
    check(f"{label}: routed to the Service", svc.get("name") == "pc-pullcheck" and svc.get("namespace") == NS
          and svc.get("path") == ("/validate" if label == "validating" else "/mutate"), svc)
check("mutating: reinvocationPolicy IfNeeded", mwc[0].get("reinvocationPolicy") == "IfNeeded")

secret = one(docs, "Secret")
ca_b64 = secret["data"]["ca.crt"]
check("generated Secret is kubernetes.io/tls with ca.crt, tls.crt, tls.key",
      secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"})
check("caBundle of both configurations is the Secret's CA",
      vwc[0]["clientConfig"]["caBundle"] == ca_b64 and mwc[0]["clientConfig"]["caBundle"] == ca_b64)
with tempfile.TemporaryDirectory() as t:
    ca_path = os.path.join(t, "ca.crt")
    open(ca_path, "wb").write(base64.b64decode(ca_b64))
    crt = base64.b64decode(secret["data"]["tls.crt"]).decode()
    v = openssl(["verify", "-CAfile", ca_path, "-purpose", "sslserver"], crt)
    check("serving certificate verifies against the CA", v.returncode == 0, v.stdout + v.stderr)
    san = openssl(["x509", "-noout", "-ext", "subjectAltName"], crt).stdout
    check("serving certificate names the Service", f"DNS:pc-pullcheck.{NS}.svc" in san, san)
again = render() or []
check("helm template can't look up: each run generates a new CA (documented)",
      again and one(again, "Secret")["data"]["ca.crt"] != ca_b64)

dep = one(docs, "Deployment")
spec = dep["spec"]["template"]["spec"]
c = spec["containers"][0]
check("2 replicas", dep["spec"]["replicas"] == 2)
psc, csc = spec["securityContext"], c["securityContext"]
check("pod securityContext restricted", psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 65532
      and psc.get("seccompProfile") == {"type": "RuntimeDefault"}, psc)
check("container securityContext restricted", csc.get("readOnlyRootFilesystem") is True
      and csc.get("allowPrivilegeEscalation") is False and csc.get("capabilities") == {"drop": ["ALL"]}
      and csc.get("runAsNonRoot") is True, csc)
check("resources set", c["resources"].get("requests") and c["resources"].get("limits"))
lp, rp = c["livenessProbe"]["httpGet"], c["readinessProbe"]["httpGet"]
check("probes over https on /healthz and /readyz",
      lp == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
      and rp == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}, (lp, rp))
tsc = spec.get("topologySpreadConstraints", [])
check("topology spread over hostname and zone with the pod selector",
      {t["topologyKey"] for t in tsc} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
      and all(t["labelSelector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"] for t in tsc), tsc)
args = c["args"]
check("args: webhook subcommand, enforce, budget 8, both platforms",
      args[0] == "webhook" and "--mode=enforce" in args and "--budget=8" in args
      and "--cluster-platform=linux/amd64" in args and "--cluster-platform=linux/arm64" in args
      and "--fail-closed" not in args and "--allow-loopback-registries" not in args, args)
check("args: Docker Hub quota-aware platform check by default (affordable, margin 10)",
      "--metered-get=affordable" in args and "--metered-quota-margin=10" in args, args)
check("image tag defaults to appVersion", c["image"] == f"{REPO}:0.1.0", c["image"])
check("tls volume from the Secret", spec["volumes"][0]["secret"]["secretName"] == "pc-pullcheck-tls")
pdb = one(docs, "PodDisruptionBudget")
check("PDB minAvailable 1 on the pods", pdb["spec"].get("minAvailable") == 1
      and pdb["spec"]["selector"] == dep["spec"]["selector"])
cr = one(docs, "ClusterRole")
check("ClusterRole reads secrets and serviceaccounts only",
      cr["rules"] == [{"apiGroups": [""], "resources": ["secrets", "serviceaccounts"], "verbs": ["get"]}], cr["rules"])
crb = one(docs, "ClusterRoleBinding")
check("ClusterRoleBinding to the chart's ServiceAccount",
      crb["subjects"] == [{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": NS}], crb["subjects"])

# ---- cert-manager --------------------------------------------------------------------
docs = render("--set", "tls.mode=certManager") or []
k = kinds(docs)
check("certManager: Issuers, Certificates, no Secret",
      k.get("Certificate") == 2 and k.get("Issuer") == 2 and "Secret" not in k, k)
for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
    d = one(docs, kind)
    check(f"certManager: {kind} inject-ca-from the serving Certificate",
          d["metadata"].get("annotations", {}).get("cert-manager.io/inject-ca-from") == f"{NS}/pc-pullcheck-tls"
          and "caBundle" not in d["webhooks"][0]["clientConfig"], d["metadata"])
serving = [d for d in docs if d["kind"] == "Certificate" and d["metadata"]["name"] == "pc-pullcheck-tls"]
check("certManager: serving Certificate writes the mounted Secret, names the Service",
      len(serving) == 1 and serving[0]["spec"]["secretName"] == "pc-pullcheck-tls"
      and f"pc-pullcheck.{NS}.svc" in serving[0]["spec"]["dnsNames"], serving)
docs = render("--set", "tls.mode=certManager", "--set", "tls.certManager.issuerRef.name=corp-ca",
              "--set", "tls.certManager.issuerRef.kind=ClusterIssuer") or []
k = kinds(docs)
check("certManager with issuerRef: one Certificate, no Issuer",
      k.get("Certificate") == 1 and "Issuer" not in k, k)
check("certManager with issuerRef: used", one(docs, "Certificate")["spec"]["issuerRef"]
      == {"name": "corp-ca", "kind": "ClusterIssuer"})

# ---- external ------------------------------------------------------------------------
check("external without caBundle fails", render("--set", "tls.mode=external", expect_error="tls.caBundle is required") is None)
docs = render("--set", "tls.mode=external", "--set", "tls.caBundle=CA-PEM", "--set", "tls.secretName=my-tls") or []
k = kinds(docs)
check("external: no Secret or Certificate", "Secret" not in k and "Certificate" not in k, k)
check("external: caBundle from tls.caBundle",
      one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]
      == base64.b64encode(b"CA-PEM").decode())
check("external: Deployment mounts tls.secretName",
      one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"] == "my-tls")

# ---- RBAC per namespace --------------------------------------------------------------
docs = render("--set", "rbac.scope=namespaces", "--set", "rbac.namespaces={team-a,team-b}") or []
k = kinds(docs)
rbs = [d for d in docs if d["kind"] == "RoleBinding"]
check("rbac namespaces: RoleBindings instead of a ClusterRoleBinding",
      "ClusterRoleBinding" not in k and k.get("ClusterRole") == 1 and len(rbs) == 2, k)
check("rbac namespaces: one RoleBinding per listed namespace, to the ClusterRole",
      sorted(r["metadata"]["namespace"] for r in rbs) == ["team-a", "team-b"]
      and all(r["roleRef"]["kind"] == "ClusterRole" for r in rbs))
check("rbac namespaces with an empty list fails", render("--set", "rbac.scope=namespaces", expect_error="rbac.namespaces is empty") is None)

# ---- DaemonSet, ServiceMonitor -------------------------------------------------------
docs = render("--set", "prePull.enabled=true", "--set", "inject.image=mirror.example/pullcheck:0.1.0") or []
ds = [d for d in docs if d["kind"] == "DaemonSet"]
check("prePull: one DaemonSet", len(ds) == 1)
if ds:
    s = ds[0]["spec"]["template"]["spec"]
    check("prePull: init container runs the inject image's --version",
          s["initContainers"][0]["image"] == "mirror.example/pullcheck:0.1.0"
          and s["initContainers"][0]["args"] == ["--version"], s["initContainers"])
    check("prePull: pause container holds the pod", s["containers"][0]["image"].startswith("registry.k8s.io/pause:"))
    check("prePull: tolerates every taint", {"operator": "Exists"} in s.get("tolerations", []))
    check("prePull: restricted securityContext",
          s["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
          and s["securityContext"]["runAsNonRoot"] is True)
docs = render("--set", "serviceMonitor.enabled=true") or []
sm = [d for d in docs if d["kind"] == "ServiceMonitor"]
check("serviceMonitor: one ServiceMonitor on https /metrics", len(sm) == 1
      and sm[0]["spec"]["endpoints"][0]["scheme"] == "https" and sm[0]["spec"]["endpoints"][0]["path"] == "/metrics")
check("serviceMonitor off by default", "ServiceMonitor" not in kinds(render() or []))

# ---- webhook switched off ------------------------------------------------------------
docs = render("--set", "webhook.enabled=false")
check("webhook disabled: renders nothing", docs == [], docs and kinds(docs))
docs = render("--set", "webhook.enabled=false", "--set", "prePull.enabled=true") or []
check("webhook disabled + prePull: only the DaemonSet", kinds(docs) == {"DaemonSet": 1}, kinds(docs))
docs = render("--set", "webhook.validating.enabled=false") or []
k = kinds(docs)
check("validating off: only the mutating configuration",
      "ValidatingWebhookConfiguration" not in k and k.get("MutatingWebhookConfiguration") == 1, k)

# ---- URL mode, policy options --------------------------------------------------------
docs = render("--set", "webhook.url=https://127.0.0.1:9443") or []
for kind, path in (("ValidatingWebhookConfiguration", "/validate"), ("MutatingWebhookConfiguration", "/mutate")):
    cc = one(docs, kind)["webhooks"][0]["clientConfig"]
    check(f"url mode: {kind} by URL", cc.get("url") == f"https://127.0.0.1:9443{path}" and "service" not in cc, cc)
crt = base64.b64decode(one(docs, "Secret")["data"]["tls.crt"]).decode()
san = openssl(["x509", "-noout", "-ext", "subjectAltName"], crt).stdout
check("url mode: the generated certificate covers the URL's IP", "IP Address:127.0.0.1" in san, san)

docs = render("--set", "webhook.mode=warn", "--set", "webhook.failClosed=true", "--set", "webhook.failurePolicy=Fail",
              "--set", "webhook.timeoutSeconds=5", "--set", "inject.pinDigests=true", "--set", "inject.failFast=true",
              "--set", "clusterPlatforms={linux/amd64}", "--set", "nodeCredentials={none}",
              "--set", "registry.deny={*.internal}", "--set", "webhook.excludeNamespaces={ops}") or []
args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
check("options reach the args", all(a in args for a in (
    "--mode=warn", "--fail-closed", "--budget=3", "--pin-digests", "--fail-fast",
    "--cluster-platform=linux/amd64", "--node-credentials=none", "--deny-registry=*.internal"))
      and "--cluster-platform=linux/arm64" not in args, args)
w = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]
check("failurePolicy Fail and timeoutSeconds 5", w["failurePolicy"] == "Fail" and w["timeoutSeconds"] == 5)
notin = [e for e in w["namespaceSelector"]["matchExpressions"] if e["operator"] == "NotIn"][0]["values"]
check("excludeNamespaces adds to the always-excluded ones", set(notin) == {NS, "kube-system", "ops"}, notin)

values = {
    "registry": {"caCerts": "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n",
                 "hostsToml": {"registry.example.com:5000": 'server = "https://registry.example.com:5000"\n'}},
    "webhook": {"extraKinds": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "resource": "rayjobs",
                                "podTemplatePaths": ["spec.rayClusterSpec.headGroupSpec.template"]}]},
}
with tempfile.NamedTemporaryFile("w", suffix=".yaml") as vf:
    json.dump(values, vf)
    vf.flush()
    docs = render("-f", vf.name) or []
cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
check("hostsToml and config ConfigMaps", set(cms) == {"pc-pullcheck-hosts", "pc-pullcheck-config"}, set(cms))
if len(cms) == 2:
    kinds_yaml = yaml.safe_load(cms["pc-pullcheck-config"]["data"]["kinds.yaml"])
    check("kinds.yaml has the table row without the rule-only fields",
          kinds_yaml == [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                          "podTemplatePaths": ["spec.rayClusterSpec.headGroupSpec.template"]}], kinds_yaml)
    spec = one(docs, "Deployment")["spec"]["template"]["spec"]
    hosts = [v for v in spec["volumes"] if v["name"] == "hosts"][0]["configMap"]["items"]
    check("hosts.toml mounted as certs.d/<host>/hosts.toml",
          hosts == [{"key": "registry.example.com_5000", "path": "registry.example.com:5000/hosts.toml"}], hosts)
    args = spec["containers"][0]["args"]
    check("--hosts-dir, --ca-file and --kinds passed", all(a in args for a in (
        "--hosts-dir=/etc/pullcheck/certs.d", "--ca-file=/etc/pullcheck/config/registry-ca.crt",
        "--kinds=/etc/pullcheck/config/kinds.yaml")), args)
    rules = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]["rules"]
    check("extraKinds add a rule", {"apiGroups": ["ray.io"], "apiVersions": ["v1"], "resources": ["rayjobs"],
                                    "operations": ["CREATE"], "scope": "Namespaced"} in rules, rules)

# ---- credential providers ------------------------------------------------------------
spec = one(render(), "Deployment")["spec"]["template"]["spec"]
args = spec["containers"][0]["args"]
check("credential providers off by default: no init container, no provider flags",
      "initContainers" not in spec and not any("credential-provider" in a or a == "--provider-token-requests"
                                               for a in args), args)

PROVIDER_CONFIG = """apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages: ["*.dkr.ecr.*.amazonaws.com"]
    defaultCacheDuration: 12h
    apiVersion: credentialprovider.kubelet.k8s.io/v1
"""


def providers(**extra):
    """Values with credentialProviders on (plugin image example.com/plugins:v1), merged
    with `extra` (credentialProviders keys)."""
    cp = {"enabled": True, "config": PROVIDER_CONFIG,
          "pluginImage": {"repository": "example.com/plugins", "tag": "v1"}}
    cp.update(extra)
    return {"credentialProviders": cp}


def render_values(values, *args, expect_error=None):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as vf:
        json.dump(values, vf)
        vf.flush()
        return render("-f", vf.name, *args, expect_error=expect_error)


docs = render_values(providers(files={"azure.json": '{"cloud": "AzurePublicCloud"}\n'})) or []
k = kinds(docs)
cm = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "pc-pullcheck-credential-providers"]
check("providers: a ConfigMap holding the config and the extra files", len(cm) == 1
      and cm[0]["data"] == {"config.yaml": PROVIDER_CONFIG, "azure.json": '{"cloud": "AzurePublicCloud"}\n'},
      cm and cm[0]["data"])
check("providers without token requests: no Role, RoleBinding or policy", not ({"Role", "RoleBinding",
      "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} & set(k)), k)
dep = one(docs, "Deployment")
spec = dep["spec"]["template"]["spec"]
inits = spec.get("initContainers", [])
check("providers: one copy init container of the plugin image", len(inits) == 1
      and inits[0]["name"] == "credential-provider-plugins" and inits[0]["image"] == "example.com/plugins:v1"
      and inits[0]["imagePullPolicy"] == "IfNotPresent", inits)
init = inits[0] if inits else {}
check("providers: default copy command copies pluginPath's content into the emptyDir",
      init.get("command") == ["cp", "-a", "/plugins/.", "/credential-providers/bin/"], init.get("command"))
check("providers: the init container mounts the emptyDir writable",
      init.get("volumeMounts") == [{"name": "credential-provider-bin", "mountPath": "/credential-providers/bin"}],
      init.get("volumeMounts"))
isc = init.get("securityContext", {})
check("providers: the init container is restricted too", isc.get("readOnlyRootFilesystem") is True
      and isc.get("allowPrivilegeEscalation") is False and isc.get("runAsNonRoot") is True
      and isc.get("capabilities") == {"drop": ["ALL"]}, isc)
vols = {v["name"]: v for v in spec["volumes"]}
check("providers: bin dir is an emptyDir, config from the ConfigMap",
      vols.get("credential-provider-bin") == {"name": "credential-provider-bin", "emptyDir": {}}
      and vols.get("credential-providers", {}).get("configMap", {}).get("name") == "pc-pullcheck-credential-providers",
      vols)
mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
check("providers: the webhook mounts the config and the bin dir read-only",
      mounts.get("credential-providers") == {"name": "credential-providers", "readOnly": True,
                                             "mountPath": "/etc/pullcheck/credential-providers"}
      and mounts.get("credential-provider-bin") == {"name": "credential-provider-bin", "readOnly": True,
                                                    "mountPath": "/credential-providers/bin"}, mounts)
args = spec["containers"][0]["args"]
check("providers: --image-credential-provider-config and -bin-dir passed, no token requests",
      "--image-credential-provider-config=/etc/pullcheck/credential-providers/config.yaml" in args
      and "--image-credential-provider-bin-dir=/credential-providers/bin" in args
      and "--provider-token-requests" not in args, args)
checksum = dep["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
other = render_values(providers(config=PROVIDER_CONFIG + "  # changed\n")) or []
check("providers: a config change rolls the pods (checksum/config)",
      one(other, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"] != checksum)

docs = render_values(providers(pluginPath="/opt/bin/", pluginImage={
    "repository": "example.com/plugins", "digest": "sha256:" + "a" * 64, "pullPolicy": "Always"})) or []
init = one(docs, "Deployment")["spec"]["template"]["spec"]["initContainers"][0]
check("providers: pluginPath and a digest-pinned image",
      init["command"] == ["cp", "-a", "/opt/bin/.", "/credential-providers/bin/"]
      and init["image"] == "example.com/plugins@sha256:" + "a" * 64 and init["imagePullPolicy"] == "Always", init)
docs = render_values(providers(copyCommand=["/busybox", "cp", "/plugins/ecr-credential-provider",
                                            "/credential-providers/bin/"])) or []
init = one(docs, "Deployment")["spec"]["template"]["spec"]["initContainers"][0]
check("providers: copyCommand overrides the copy",
      init["command"] == ["/busybox", "cp", "/plugins/ecr-credential-provider", "/credential-providers/bin/"],
      init["command"])

TOKENS = {"enabled": True, "namespaces": ["team-a", "team-b", "team-a"],
          "audiences": ["sts.amazonaws.com", "pullcheck-test-audience"]}
docs = render_values(providers(tokenRequests=TOKENS)) or []
k = kinds(docs)
roles = [d for d in docs if d["kind"] == "Role"]
check("token requests: one Role per listed namespace (duplicates once)",
      sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"], roles)
check("token requests: the Role creates serviceaccounts/token only",
      all(r["rules"] == [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]
          and r["metadata"]["name"] == "pc-pullcheck-provider-tokens" for r in roles), roles)
rbs = [d for d in docs if d["kind"] == "RoleBinding"]
check("token requests: a RoleBinding per namespace, Role to the webhook's ServiceAccount",
      sorted(r["metadata"]["namespace"] for r in rbs) == ["team-a", "team-b"]
      and all(r["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                               "name": "pc-pullcheck-provider-tokens"}
              and r["subjects"] == [{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": NS}]
              for r in rbs), rbs)
check("token requests: no ClusterRole grants tokens",
      k.get("ClusterRole") == 1 and one(docs, "ClusterRole")["rules"]
      == [{"apiGroups": [""], "resources": ["secrets", "serviceaccounts"], "verbs": ["get"]}], k)
vap = one(docs, "ValidatingAdmissionPolicy")["spec"]
check("token requests: the policy matches TokenRequest creation, fails closed",
      vap["failurePolicy"] == "Fail" and vap["matchConstraints"]["resourceRules"]
      == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["serviceaccounts/token"]}],
      vap)
check("token requests: the policy applies to the webhook's ServiceAccount only",
      vap["matchConditions"] == [{"name": "requested-by-pullcheck", "expression":
                                  f'request.userInfo.username == "system:serviceaccount:{NS}:pc-pullcheck"'}],
      vap["matchConditions"])
check("token requests: the policy allows the listed audiences only, and no empty list",
      vap["validations"][0]["expression"] == 'has(object.spec.audiences) && size(object.spec.audiences) > 0 && '
      'object.spec.audiences.all(a, a in ["sts.amazonaws.com","pullcheck-test-audience"])'
      and vap["validations"][0]["message"] == "pullcheck may request ServiceAccount tokens only for the audiences "
      "in credentialProviders.tokenRequests.audiences (sts.amazonaws.com, pullcheck-test-audience)",
      vap["validations"])
check("token requests: the policy caps the token lifetime at the webhook's 600 s",
      vap["validations"][1]["expression"] == "has(object.spec.expirationSeconds) && object.spec.expirationSeconds <= 600",
      vap["validations"])
vapb = one(docs, "ValidatingAdmissionPolicyBinding")
check("token requests: the policy is bound with Deny", vapb["spec"] == {
    "policyName": "pc-pullcheck-provider-token-audiences", "validationActions": ["Deny"]}, vapb["spec"])
args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
check("token requests: --provider-token-requests passed", "--provider-token-requests" in args, args)

docs = render_values(providers(tokenRequests=TOKENS), "--set", "serviceAccount.name=pc-custom",
                     "--set", "rbac.create=false") or []
k = kinds(docs)
check("token requests with rbac.create=false: the policy stays, no Role or RoleBinding",
      k.get("ValidatingAdmissionPolicy") == 1 and "Role" not in k and "RoleBinding" not in k, k)
check("token requests: the policy names serviceAccount.name",
      one(docs, "ValidatingAdmissionPolicy")["spec"]["matchConditions"][0]["expression"]
      == f'request.userInfo.username == "system:serviceaccount:{NS}:pc-custom"')

for label, tr, err in (
        ("without namespaces", {"enabled": True, "audiences": ["a"]},
         "credentialProviders.tokenRequests.namespaces is empty"),
        ("without audiences", {"enabled": True, "namespaces": ["team-a"]},
         "credentialProviders.tokenRequests.audiences is empty")):
    check(f"token requests {label} fails", render_values(providers(tokenRequests=tr), expect_error=err) is None)
check("token requests without credentialProviders.enabled fails", render_values(
    {"credentialProviders": {"tokenRequests": TOKENS}},
    expect_error="credentialProviders.tokenRequests.enabled needs credentialProviders.enabled") is None)
check("providers without a config fails", render_values(
    providers(config=""), expect_error="credentialProviders.config is empty") is None)
check("providers without a plugin image fails", render_values(
    providers(pluginImage={"repository": ""}),
    expect_error="credentialProviders.pluginImage.repository is empty") is None)
check("schema rejects an unknown credentialProviders key", render_values(
    providers(tokenRequest={"enabled": True}), expect_error="additional properties") is None)

# ---- watch ---------------------------------------------------------------------------
check("watch off by default: no watch objects",
      not [d for d in render() or [] if d["metadata"]["name"].endswith("-watch")])
docs = render("--set", "watch.enabled=true") or []
w = [d for d in docs if d["metadata"]["name"] == "pc-pullcheck-watch"]
check("watch: ServiceAccount, ClusterRole, ClusterRoleBinding, Deployment, Service",
      sorted(d["kind"] for d in w) == ["ClusterRole", "ClusterRoleBinding", "Deployment", "Service",
                                        "ServiceAccount"], sorted(d["kind"] for d in w))
wk = kinds(docs)
check("watch: the webhook's objects stay as they are", wk == {
    "Deployment": 2, "Service": 2, "ServiceAccount": 2, "ClusterRole": 2,
    "ClusterRoleBinding": 2, "Secret": 1, "PodDisruptionBudget": 1,
    "ValidatingWebhookConfiguration": 1, "MutatingWebhookConfiguration": 1}, wk)
wdep = next(d for d in w if d["kind"] == "Deployment")
wspec = wdep["spec"]["template"]["spec"]
wc = wspec["containers"][0]
check("watch: one replica by default", wdep["spec"]["replicas"] == 1)
check("watch: same image as the webhook", wc["image"] == f"{REPO}:0.1.0", wc["image"])
check("watch: default args (listen, rate limit, the webhook's opt-in label)", wc["args"] == [
    "watch", "--listen=0.0.0.0:8080", "--max-deletions-per-minute=30",
    "--namespace-label=pullcheck.io/enabled=true"], wc["args"])
check("watch: runs as its own ServiceAccount", wspec["serviceAccountName"] == "pc-pullcheck-watch")
check("watch: probes over http on /healthz and /readyz",
      wc["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
      and wc["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"})
check("watch: restricted securityContext", wc["securityContext"].get("readOnlyRootFilesystem") is True
      and wspec["securityContext"].get("runAsNonRoot") is True)
check("watch: resources set", wc["resources"].get("requests") and wc["resources"].get("limits"))
webhook_sel = one([d for d in docs if d["metadata"]["name"] == "pc-pullcheck"], "Service")["spec"]["selector"]
wlabels = wdep["spec"]["template"]["metadata"]["labels"]
check("watch: its pods are not selected by the webhook's Service and PDB",
      not all(wlabels.get(k) == v for k, v in webhook_sel.items()), (webhook_sel, wlabels))
wsvc = next(d for d in w if d["kind"] == "Service")
check("watch: Service selects the watch pods, port metrics",
      wsvc["spec"]["selector"] == wdep["spec"]["selector"]["matchLabels"]
      and wsvc["spec"]["ports"][0]["targetPort"] == "metrics")
rules = next(d for d in w if d["kind"] == "ClusterRole")["rules"]
got = sorted((r["resources"][0], tuple(sorted(r["verbs"]))) for r in rules
             if r["apiGroups"] == [""] and len(r["resources"]) == 1)
check("watch RBAC: exactly pods get/list/watch/delete, pods/status patch, events create/patch/list, namespaces get",
      len(got) == len(rules) and got == [
          ("events", ("create", "list", "patch")), ("namespaces", ("get",)),
          ("pods", ("delete", "get", "list", "watch")), ("pods/status", ("patch",))], rules)
crb = next(d for d in w if d["kind"] == "ClusterRoleBinding")
check("watch RBAC: bound to the watch's ServiceAccount",
      crb["roleRef"]["name"] == "pc-pullcheck-watch"
      and crb["subjects"] == [{"kind": "ServiceAccount", "name": "pc-pullcheck-watch", "namespace": NS}])

docs = render("--set", "watch.enabled=true", "--set", "watch.dryRun=true",
              "--set", "watch.transientGraceSeconds=120", "--set", "watch.maxDeletionsPerMinute=5",
              "--set", "watch.namespaceLabel=", "--set", "watch.replicas=2",
              "--set", "watch.extraArgs={--once}",
              "--set-json", 'registry.hostsToml={"docker.io":"server = \\"https://registry-1.docker.io\\""}') or []
wdep = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "pc-pullcheck-watch"][0]
wspec = wdep["spec"]["template"]["spec"]
check("watch: values reach the args (no label: every namespace)", wspec["containers"][0]["args"] == [
    "watch", "--listen=0.0.0.0:8080", "--max-deletions-per-minute=5", "--transient-grace=120",
    "--dry-run", "--hosts-dir=/etc/pullcheck/certs.d", "--once"], wspec["containers"][0]["args"])
check("watch: replicas", wdep["spec"]["replicas"] == 2)
check("watch: registry.hostsToml mounted as the hosts dir",
      wspec["volumes"] == [{"name": "hosts", "configMap": {"name": "pc-pullcheck-hosts",
                            "items": [{"key": "docker.io", "path": "docker.io/hosts.toml"}]}}]
      and wspec["containers"][0]["volumeMounts"][0]["mountPath"] == "/etc/pullcheck/certs.d")

docs = render("--set", "webhook.enabled=false", "--set", "watch.enabled=true",
              "--set-json", 'registry.hostsToml={"r.io":"server = \\"https://r.io\\""}') or []
k = kinds(docs)
check("watch alone (webhook off): the watch objects and the hosts ConfigMap only", k == {
    "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Deployment": 1, "Service": 1,
    "ConfigMap": 1}, k)
docs = render("--set", "watch.enabled=true", "--set", "serviceMonitor.enabled=true") or []
sms = [d for d in docs if d["kind"] == "ServiceMonitor"]
check("watch + serviceMonitor: a second ServiceMonitor on http /metrics",
      len(sms) == 2 and any(s["metadata"]["name"] == "pc-pullcheck-watch"
                            and s["spec"]["endpoints"][0]["scheme"] == "http"
                            and s["spec"]["endpoints"][0]["port"] == "metrics" for s in sms))
docs = render("--set", "watch.enabled=true", "--set", "watch.rbac.create=false",
              "--set", "watch.serviceAccount.create=false", "--set", "watch.serviceAccount.name=mine") or []
w = [d for d in docs if d["metadata"]["name"].endswith("-watch")]
check("watch with rbac and serviceAccount off: Deployment and Service only, named ServiceAccount",
      sorted(d["kind"] for d in w) == ["Deployment", "Service"]
      and [d for d in w if d["kind"] == "Deployment"][0]["spec"]["template"]["spec"]["serviceAccountName"] == "mine")
check("schema rejects a namespaceLabel without =",
      render("--set", "watch.namespaceLabel=team", expect_error="does not match pattern") is None)
check("schema rejects a non-numeric transientGraceSeconds",
      render("--set", "watch.transientGraceSeconds=soon", expect_error="transientGraceSeconds") is None)

# ---- restart-rules probe (webhook --probe-namespace) -------------------------------------
PROBE = "pc-pullcheck-restart-rules-probe"
def probe_parts(docs):
    return {d["kind"]: d for d in docs if d["metadata"]["name"] == PROBE}
def deploy_args(docs):
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
docs = render(probe=True) or []
p = probe_parts(docs)
check("probe: Role, RoleBinding, policy and binding by default",
      sorted(p) == ["Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"], sorted(p))
check("probe: the Role creates pods in the release namespace only",
      p["Role"]["metadata"]["namespace"] == NS
      and p["Role"]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}], p.get("Role"))
check("probe: the RoleBinding names the webhook's ServiceAccount",
      p["RoleBinding"]["metadata"]["namespace"] == NS
      and p["RoleBinding"]["subjects"] == [{"kind": "ServiceAccount", "name": "pc-pullcheck", "namespace": NS}]
      and p["RoleBinding"]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": PROBE},
      p.get("RoleBinding"))
vap = p["ValidatingAdmissionPolicy"]["spec"]
check("probe: the policy denies the webhook's non-dry-run pod creates, failing closed",
      vap["failurePolicy"] == "Fail"
      and vap["matchConstraints"]["resourceRules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                                        "operations": ["CREATE"], "resources": ["pods"]}]
      and vap["matchConditions"] == [{"name": "created-by-pullcheck", "expression":
                                      f'request.userInfo.username == "system:serviceaccount:{NS}:pc-pullcheck"'}]
      and vap["validations"][0]["expression"] == "has(request.dryRun) && request.dryRun", vap)
check("probe: the policy is bound with Deny",
      p["ValidatingAdmissionPolicyBinding"]["spec"] == {"policyName": PROBE, "validationActions": ["Deny"]})
args = deploy_args(docs)
check("probe: --probe-namespace and --probe-service-account passed",
      f"--probe-namespace={NS}" in args and "--probe-service-account=pc-pullcheck" in args, args)
for label, extra in (("transient Count", ["--set", "inject.transient=Count"]),
                     ("transient Ignore", ["--set", "inject.transient=Ignore"]),
                     ("restartRulesProbe=false", ["--set", "inject.restartRulesProbe=false"]),
                     ("Kubernetes 1.29 (no ValidatingAdmissionPolicy v1)", ["--kube-version", "1.29.4"]),
                     ("Kubernetes 1.34 (never probed there)", ["--kube-version", "1.34.2"])):
    docs = render(*extra, probe=True) or []
    check(f"probe: none with {label}", not probe_parts(docs)
          and not any(a.startswith("--probe-") for a in deploy_args(docs)), probe_parts(docs))
docs = render("--set", "inject.transient=Restart", probe=True) or []
check("probe: with transient Restart too", len(probe_parts(docs)) == 4)
docs = render("--kube-version", "1.35.0-gke.100", probe=True) or []
check("probe: on a managed 1.35 (a pre-release suffix)", len(probe_parts(docs)) == 4)
docs = render("--set", "rbac.create=false", probe=True) or []
check("probe with rbac.create=false: the policy and the flags stay, no Role or RoleBinding",
      sorted(probe_parts(docs)) == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
      and f"--probe-namespace={NS}" in deploy_args(docs), sorted(probe_parts(docs)))
check("schema rejects a non-boolean restartRulesProbe",
      render("--set", "inject.restartRulesProbe=maybe", expect_error="restartRulesProbe") is None)

# ---- schema --------------------------------------------------------------------------
check("schema rejects an unknown mode", render("--set", "webhook.mode=block", expect_error="must be one of") is None)
docs = render("--set", "inject.transient=Restart")
args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
check("inject.transient=Restart passes --transient=restart", "--transient=restart" in args, args)
check("schema rejects an unknown meteredGet", render("--set", "registry.meteredGet=sometimes", expect_error="must be one of") is None)
check("schema rejects an unknown value", render("--set", "webhok.mode=warn", expect_error="additional properties") is None)
check("schema rejects a webhook URL with a path", render("--set", "webhook.url=https://x/validate", expect_error="does not match pattern") is None)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
