#!/usr/bin/env bash
# Issue 5: measure pullcheck's fail-fast behaviour on a real single-node cluster
# (scripts/cluster.sh) and (re)write docs/fail-fast-results.md. Opt-in; not run in CI.
#
#   scripts/fail-fast-scenarios.sh            # up (if needed), run 1-8, write the doc, down
#   FF_KEEP_CLUSTER=1 scripts/fail-fast-scenarios.sh   # leave the cluster up afterwards
#   FF_SCENARIOS="2 3" scripts/fail-fast-scenarios.sh  # a subset (the doc lists only those)
#
# Each Job runs with hostNetwork (containerd and the init container both reach the
# plain-HTTP registries on 127.0.0.1) and automountServiceAccountToken: false. While a Job
# runs, the API is polled every ~0.5 s with kubectl (one `get pods,jobs -A -o json` per
# sample): Job conditions and counts, each pod's phase and container states, and the
# effective requests (max(sum of containers, largest init container)) of the non-terminal
# pods bound to the node, for the scenario's namespace and for the whole node (what
# `kubectl describe node` calls Allocated resources). Times are seconds from just before
# `kubectl create`.
#
# Env: FF_BASELINE_WINDOW (s1, default 120 s), FF_ONFAILURE_WINDOW (s6b, default 1080 s),
#      FF_OUT (default docs/fail-fast-results.md), FF_WORK (scratch, default /tmp/pullcheck-ff),
#      FF_DATA (the timelines as CSV, default docs/fail-fast-data/timeline.csv) and FF_CHART
#      (the SVG scripts/chart.py draws from them, default docs/fail-fast-timeline.svg).
#      FF_MERGE=DIR (with FF_SCENARIOS): DIR is an earlier run's FF_WORK; its rows, summaries,
#      details and timelines stand for the scenarios not run now, and the doc says which ran when.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${FF_OUT:-$ROOT/docs/fail-fast-results.md}
DATA=${FF_DATA:-$ROOT/docs/fail-fast-data/timeline.csv}   # the chart's data (scripts/chart.py)
CHART=${FF_CHART:-$ROOT/docs/fail-fast-timeline.svg}
WORK=${FF_WORK:-/tmp/pullcheck-ff}
SCENARIOS=${FF_SCENARIOS:-1 2 3 4 5 6 7 8 9 10 11}
BASELINE_WINDOW=${FF_BASELINE_WINDOW:-120}
ONFAILURE_WINDOW=${FF_ONFAILURE_WINDOW:-1080}
TDIR=${CARGO_TARGET_DIR:-target}
case $TDIR in /*) ;; *) TDIR=$ROOT/$TDIR ;; esac
PC=$TDIR/x86_64-unknown-linux-musl/release/pullcheck   # scripts/build-static.sh's output

# shellcheck source=scripts/lib.sh
. "$HERE/lib.sh"   # free_port, make_tls

log() { printf '[fail-fast] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# has ID: ID is selected; a letter-suffixed ID (9a, 10b) is also selected by its number alone
has() {
  case " $SCENARIOS " in *" $1 "*) return 0 ;; esac
  case $1 in [0-9]*[a-z]*) case " $SCENARIOS " in *" ${1%%[a-z]*} "*) return 0 ;; esac ;; esac
  return 1
}

MERGE=${FF_MERGE:-}
[ -z "$MERGE" ] || [ -d "$MERGE/rows" ] || die "FF_MERGE=$MERGE is not an earlier run's FF_WORK (no rows/)"
[ -z "$MERGE" ] || [ "$(cd "$MERGE" && pwd)" != "$(mkdir -p "$WORK" && cd "$WORK" && pwd)" ] || die "FF_MERGE must not be FF_WORK (it is emptied first)"
rm -rf "$WORK"; mkdir -p "$WORK/rows" "$WORK/details" "$WORK/summary" "$WORK/timeline"
if [ -n "$MERGE" ]; then
  # the earlier run's outputs first; every scenario run now overwrites its own files
  for d in rows details summary timeline; do [ ! -d "$MERGE/$d" ] || cp -a "$MERGE/$d/." "$WORK/$d/"; done
  MERGED_FROM=$(cat "$MERGE/run.txt" 2>/dev/null || echo "an earlier run")
fi
started_cluster=
if ! "$ROOT/scripts/cluster.sh" status >/dev/null 2>&1; then
  log "bringing the cluster up (scripts/cluster.sh up)"
  started_cluster=1
fi
cleanup() {
  local rc=$?
  [ -z "${WEBHOOK_PID:-}" ] || kill "$WEBHOOK_PID" 2>/dev/null || true
  [ -z "${HUB_PID:-}" ] || kill "$HUB_PID" 2>/dev/null || true
  [ -z "${HUB_HOSTS_DIR:-}" ] || rm -rf "$HUB_HOSTS_DIR"
  [ -z "${S6B_PID:-}" ] || kill "$S6B_PID" 2>/dev/null || true
  [ -z "${S9C_PID:-}" ] || kill "$S9C_PID" 2>/dev/null || true
  [ -z "${S9I_PID:-}" ] || kill "$S9I_PID" 2>/dev/null || true
  [ -z "${S10C_PID:-}" ] || kill "$S10C_PID" 2>/dev/null || true
  [ -z "${S10D_PID:-}" ] || kill "$S10D_PID" 2>/dev/null || true
  [ -z "${KUBEFLOW_UP:-}" ] || "$ROOT/scripts/cluster/kubeflow.sh" stop 2>/dev/null || true
  [ -z "${WATCH_PID:-}" ] || kill "$WATCH_PID" 2>/dev/null || true
  "$ROOT/scripts/cluster.sh" registry-start >/dev/null 2>&1 || true
  if [ -n "$started_cluster" ] && [ -z "${FF_KEEP_CLUSTER:-}" ]; then "$ROOT/scripts/cluster.sh" down || true; fi
  exit $rc
}
trap cleanup EXIT
[ -z "$started_cluster" ] || "$ROOT/scripts/cluster.sh" up >"$WORK/cluster.env"
eval "$("$ROOT/scripts/cluster.sh" env)"
K=(kubectl --request-timeout=10s)
WREG=$PULLCHECK_WORK_REGISTRY IREG=$PULLCHECK_INFRA_REGISTRY
MISSING=$WREG/work/app:does-not-exist
PRESENT=$WREG/work/app:v1
PC_IMAGE_LINE=$(sed -n 's/^pushed: *//p' "$PULLCHECK_CLUSTER_DIR/images/pullcheck-image.txt")
[ -n "$PC_IMAGE_LINE" ] || die "no pullcheck image pushed (see $PULLCHECK_CLUSTER_DIR/images)"
PC_IMAGE=$PC_IMAGE_LINE   # HOST/pullcheck/pullcheck:TAG@sha256:... (pinned by digest)
INJECT=("$PC" inject --image "$PC_IMAGE" "--check-arg=--insecure-registry=$WREG")

# ---- manifests ---------------------------------------------------------------------
# job_yaml NS NAME IMAGE RESTART BACKOFF [CPU MEM [EXTRA_SPEC_YAML]]
job_yaml() {
  local ns=$1 name=$2 image=$3 restart=$4 backoff=$5 cpu=${6:-1} mem=${7:-2Gi} extra=${8:-}
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
  namespace: $ns
spec:
  backoffLimit: $backoff
$extra
  template:
    spec:
      restartPolicy: $restart
      hostNetwork: true
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: $image
          resources:
            requests: {cpu: "$cpu", memory: $mem}
            limits: {cpu: "$cpu", memory: $mem}
EOF
}

new_ns() { # NS [LABEL=VALUE]
  "${K[@]}" delete namespace "$1" --ignore-not-found --wait=true >/dev/null
  "${K[@]}" create namespace "$1" >/dev/null
  [ -z "${2:-}" ] || "${K[@]}" label namespace "$1" "$2" >/dev/null
  local i
  for i in $(seq 1 60); do "${K[@]}" -n "$1" get serviceaccount default >/dev/null 2>&1 && return; sleep 0.5; done
  die "no ServiceAccount default in $1"
}

# ---- sampling ------------------------------------------------------------------------
# One jq program turns `kubectl get pods,jobs -A -o json` into one TSV sample line:
# t, finished (Failed/Complete/-), failed pods, job state, pod states, ns cpu(m), ns mem(Mi),
# node cpu(m), node mem(Mi)
# shellcheck disable=SC2016 # a jq program: its $names are jq's
JQ_SAMPLE='
def cpu_m: if . == null then 0 else tostring as $s
  | if ($s|endswith("m")) then ($s[:-1]|tonumber) else (($s|tonumber)*1000) end end;
def mem_mi: if . == null then 0 else tostring as $s
  | if ($s|endswith("Gi")) then ($s[:-2]|tonumber*1024)
    elif ($s|endswith("Mi")) then ($s[:-2]|tonumber)
    elif ($s|endswith("Ki")) then ($s[:-2]|tonumber/1024)
    elif ($s|endswith("G")) then ($s[:-1]|tonumber*1000000000/1048576)
    elif ($s|endswith("M")) then ($s[:-1]|tonumber*1000000/1048576)
    else ($s|tonumber/1048576) end end;
def eff(f): ([.spec.containers[] | .resources.requests[f] // null | if f == "cpu" then cpu_m else mem_mi end] | add // 0) as $app
  | ([.spec.initContainers[]? | select(.restartPolicy != "Always") | .resources.requests[f] // null
      | if f == "cpu" then cpu_m else mem_mi end] | max // 0) as $init
  | [$app, $init] | max;
def live: select(.spec.nodeName == $node and .status.phase != "Succeeded" and .status.phase != "Failed");
def cst: (if .state.waiting then "W:" + (.state.waiting.reason // "?")
    elif .state.running then "Running"
    elif .state.terminated then "T:" + (.state.terminated.exitCode|tostring)
    else "?" end)
  + (if (.restartCount // 0) > 0 then " r" + (.restartCount|tostring) else "" end);
[.items[] | select(.kind == "Pod")] as $pods
| ([.items[] | select(.kind == $kind and .metadata.namespace == $ns and .metadata.name == $job)][0]) as $j
| ([$pods[] | select(.metadata.namespace == $ns and .metadata.labels[$lbl] == $job)]
   | sort_by(.metadata.creationTimestamp, .metadata.name)) as $mine
| ([$j.status.conditions[]? | select(.status == "True") | .type]) as $conds
| [ $t,
    (if ($conds | index("Failed")) then "Failed" elif ($conds | index("Complete")) then "Complete"
     elif ($conds | index("Succeeded")) then "Succeeded" else "-" end),
    ([$mine[] | select(.status.phase == "Failed")] | length),
    (if $j == null then "job=none" else
      ($j.status.replicaStatuses // {} | [.[]]) as $rs
      | "active=\($j.status.active // ([$rs[].active // 0] | add) // 0) failed=\($j.status.failed // ([$rs[].failed // 0] | add) // 0) succeeded=\($j.status.succeeded // ([$rs[].succeeded // 0] | add) // 0)"
      + (if ($conds|length) > 0 then " [" + ($conds | join(",")) + "]" else "" end) end),
    ([$mine[] | (.metadata.name | split("-") | last) + ":" + .status.phase
      + "(" + ([(.status.initContainerStatuses[]? | "init " + .name + "=" + cst),
                (.status.containerStatuses[]? | .name + "=" + cst)] | join(" ")) + ")"
      + (if any(.status.conditions[]?; .type == "pullcheck.io/ImagePullFailed" and .status == "True")
         then " marked" else "" end)
      + (if .metadata.deletionTimestamp then " deleting" else "" end)] | join("; ")
      | if . == "" then "no pods" else . end),
    ([$pods[] | live | select(.metadata.namespace == $ns) | eff("cpu")] | add // 0),
    ([$pods[] | live | select(.metadata.namespace == $ns) | eff("memory")] | add // 0 | floor),
    ([$pods[] | live | eff("cpu")] | add // 0),
    ([$pods[] | live | eff("memory")] | add // 0 | floor)
  ] | map(tostring) | join("\t")'

# shellcheck disable=SC2016 # a jq program: its $names are jq's
JQ_MSG='[.items[] | select(.kind == "Pod" and .metadata.namespace == $ns and .metadata.labels[$lbl] == $job)
  | .status.initContainerStatuses[]? | select(.name == "pullcheck")
  | (.state.terminated // .lastState.terminated) | select(. != null)
  | "exit \(.exitCode): \(.message // "" | gsub("\n"; " ") | .[0:300])"] | unique | join(" / ")'

now() { date +%s.%N; }
rel() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# watch NS JOB T0 MAX_SECONDS SAMPLES [INTERVAL]: sample until the Job finished and its
# namespace holds no more requests (plus one more sample), or MAX_SECONDS passed.
# Hooks: ON_FAILED_PODS=N ON_FAILED_CMD="..." runs once when N pods of the Job failed.
watch() {
  local ns=$1 job=$2 t0=$3 max=$4 out=$5 every=${6:-${WATCH_EVERY:-0.5}} json msg line t fin nf cpu mem hooked='' extra=0
  : >"$out"
  while :; do
    t=$(rel "$t0" "$(now)")
    if ! json=$("${K[@]}" get "pods,${WATCH_RESOURCE:-jobs}" -A -o json 2>>"$WORK/kubectl.err") ||
      ! line=$(jq -r --arg ns "$ns" --arg job "$job" --arg node "$PULLCHECK_NODE" --arg t "$t" \
        --arg kind "${WATCH_KIND:-Job}" --arg lbl "${WATCH_LABEL:-job-name}" "$JQ_SAMPLE" <<<"$json"); then
      sleep "$every"; continue
    fi
    printf '%s\n' "$line" >>"$out"
    # the Job controller deletes an OnFailure pod when the Job fails: keep the last message
    msg=$(jq -r --arg ns "$ns" --arg job "$job" --arg lbl "${WATCH_LABEL:-job-name}" "$JQ_MSG" <<<"$json" 2>/dev/null) || msg=
    [ -z "$msg" ] || printf '%s\n' "$msg" >"$out.msg"
    IFS=$'\t' read -r t fin nf _ _ cpu mem _ _ <<<"$line"
    if [ -n "${ON_FAILED_PODS:-}" ] && [ -z "$hooked" ] && [ "$nf" -ge "$ON_FAILED_PODS" ]; then
      hooked=1; log "  t=${t}s: $nf failed pods: $ON_FAILED_CMD"; eval "$ON_FAILED_CMD"
      printf '%s\n' "$(rel "$t0" "$(now)")" >"$out.hook"
    fi
    if [ "$fin" != "-" ] && [ "$cpu" = 0 ]; then
      extra=$((extra + 1)); [ $extra -ge 2 ] && break
    fi
    awk -v t="$t" -v m="$max" 'BEGIN { exit !(t >= m) }' && break
    sleep "$every"
  done
}

# ---- summaries from a samples file -----------------------------------------------------
first_t() { # SAMPLES AWK_CONDITION(on $2..$9) -> first t where it holds, or "-"
  awk -F'\t' "$2 { print \$1; found=1; exit } END { if (!found) print \"-\" }" "$1"
}
timeline() { # SAMPLES -> "t s: pods [Job conditions]" at every change
  awk -F'\t' '{ c = ""; if (match($4, /\[.*\]/)) c = " Job " substr($4, RSTART, RLENGTH)
    s = $5 c; if (s != prev) { printf "%s s: %s<br>", $1, s; prev = s } }' "$1" | sed 's/<br>$//'
}
max_alloc() { # SAMPLES COL -> max of a column
  awk -F'\t' -v c="$2" 'BEGIN { m = 0 } { if ($c + 0 > m) m = $c + 0 } END { print m }' "$1"
}
last_alloc() { tail -1 "$1" | awk -F'\t' '{ printf "%sm / %sMi (node %sm / %sMi)", $6, $7, $8, $9 }'; }
alloc_str() { printf '%sm / %sMi' "$(max_alloc "$1" 6)" "$(max_alloc "$1" 7)"; }

md_escape() { sed 's/|/\\|/g' | tr '\n' ' ' | sed 's/ *$//'; }

# row SCENARIO SETTING OUTCOME TIME TIMELINE TERMMSG DURING AFTER
row() {
  local f
  f="$WORK/rows/$(printf '%s' "$1" | tr -c 'A-Za-z0-9' _)"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$@" >"$f"
}
detail() { cat >>"$WORK/details/$1"; }
summary() { printf -- '- %s\n' "$2" >"$WORK/summary/$1"; } # ID TEXT: one line of the doc's summary

term_msg() { # NS JOB [SAMPLES] -> the pullcheck init container's termination message(s),
  # deduplicated; from the last sample that had one when the pods are gone
  local m
  m=$("${K[@]}" get pods -n "$1" -o json | jq -r --arg ns "$1" --arg job "$2" --arg lbl "${WATCH_LABEL:-job-name}" "$JQ_MSG")
  if [ -z "$m" ] && [ -n "${3:-}" ] && [ -s "$3.msg" ]; then m="$(cat "$3.msg") (pod since deleted)"; fi
  printf '%s' "$m"
}
job_cond() { # NS JOB -> "Type reason: message" of the True Failed/Complete condition
  "${K[@]}" -n "$1" get job "$2" -o json | jq -r '
    [.status.conditions[]? | select(.status == "True" and (.type == "Failed" or .type == "Complete"))
     | "\(.type) \(.reason // ""): \(.message // "")"] | join("; ")'
}

# timeline_rows ID SAMPLES: the chart's data for one scenario (scripts/chart.py draws it from
# docs/fail-fast-data/timeline.csv): a row at `kubectl create`, then one per change of the
# pods, the Job's terminal condition or the requests held (the same changes the doc lists).
timeline_rows() {
  mkdir -p "$WORK/timeline"
  {
    printf '%s,0.0,0,0,kubectl create\n' "$1"
    awk -F'\t' -v id="$1" '{
      ev = "pods " $5; if ($2 != "-" && !done) { ev = "job " $2; done = 1 }
      gsub(/,/, ";", ev)
      s = $2 "|" $5 "|" $6 "|" $7
      if (s != prev) { printf "%s,%s,%s,%s,%s\n", id, $1, $6, $7, ev; prev = s } }' "$2"
  } >"$WORK/timeline/$1.csv"
}
timeline_row() { printf '%s,%s,%s,%s,%s\n' "$@" >>"$WORK/timeline/$1.csv"; } # ID T CPU_M MEM_MI EVENT

save_detail() { # ID TITLE NS JOB SAMPLES MANIFEST [NOTES]
  local id=$1 title=$2 ns=$3 job=$4 samples=$5 manifest=$6 notes=${7:-}
  timeline_rows "$id" "$samples"
  {
    echo "### $title"
    echo
    [ -z "$notes" ] || { echo "$notes"; echo; }
    echo "Manifest as applied (\`kubectl create -f\`):"
    echo
    echo '```yaml'
    sed "s#$PULLCHECK_CLUSTER_DIR#\$STATE#g" "$manifest"
    echo '```'
    echo
    echo "Samples at each change (t in s from creation; job; pods; requests held by the namespace / the node):"
    echo
    echo '```'
    awk -F'\t' '{ s = $4 " | " $5; if (s != prev) { printf "%6s  %s | %s | ns %sm/%sMi node %sm/%sMi\n", $1, $4, $5, $6, $7, $8, $9; prev = s } }' "$samples"
    echo '```'
    echo
  } | detail "$id"
}

# ---- scenarios -------------------------------------------------------------------------
s1() {
  local ns=ff-s1 f=$WORK/s1.yaml t0
  log "scenario 1: baseline, no pullcheck, ${BASELINE_WINDOW}s window"
  new_ns $ns
  job_yaml $ns baseline "$MISSING" Never 0 >"$f"
  t0=$(now); "${K[@]}" create -f "$f" >/dev/null
  watch $ns baseline "$t0" "$BASELINE_WINDOW" "$WORK/s1.tsv"
  local state active; state=$(tail -1 "$WORK/s1.tsv" | cut -f4)
  active=$(tail -1 "$WORK/s1.tsv" | cut -f5)
  local held; held=$(last_alloc "$WORK/s1.tsv")
  local td0; td0=$(now)
  "${K[@]}" -n $ns delete job baseline --cascade=foreground --wait=true >/dev/null
  local tdel; tdel=$(rel "$td0" "$(now)")
  local after; after=$("${K[@]}" get pods -A -o json | jq -r --arg node "$PULLCHECK_NODE" --arg ns $ns \
    '[.items[] | select(.spec.nodeName == $node and .metadata.namespace == $ns and .status.phase != "Succeeded" and .status.phase != "Failed")] | length')
  row "1" "no pullcheck; restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; tag does not exist" \
    "**still active after ${BASELINE_WINDOW} s** ($state)" "— (never)" "$(timeline "$WORK/s1.tsv" | md_escape)" "—" \
    "$(alloc_str "$WORK/s1.tsv")" "still held at ${BASELINE_WINDOW} s: $held; released only by deleting the Job (${tdel} s, $after pods left)"
  summary 1 "**Without pullcheck** (1): after ${BASELINE_WINDOW} s the Job is still active, its pod cycling ErrImagePull/ImagePullBackOff and holding $(alloc_str "$WORK/s1.tsv") of the node; only deleting the Job frees it."
  save_detail 1 "Scenario 1: baseline without pullcheck" $ns baseline "$WORK/s1.tsv" "$f" \
    "At the end of the ${BASELINE_WINDOW} s window: \`$state\`, pods \`$active\`. The reservation was released only by \`kubectl delete job --cascade=foreground\`."
  timeline_row 1 "$BASELINE_WINDOW.0" "$(tail -1 "$WORK/s1.tsv" | cut -f6)" "$(tail -1 "$WORK/s1.tsv" | cut -f7)" \
    "window end: Job still active"
}

# run_failing ID NS JOB MANIFEST MAX -> sets T_FAIL T_FREE (seconds) from samples
run_job() {
  local id=$1 ns=$2 job=$3 f=$4 max=$5 t0
  # shellcheck disable=SC2086 # CREATE_ARGS: extra kubectl create flags, word-split on purpose
  t0=$(now)
  # shellcheck disable=SC2086 # CREATE_ARGS: extra kubectl create flags, word-split on purpose
  "${K[@]}" create ${CREATE_ARGS:-} -f "$f" >/dev/null
  watch "$ns" "$job" "$t0" "$max" "$WORK/$id.tsv"
  # shellcheck disable=SC2016 # an awk condition: $2 is awk's field
  T_FIN=$(first_t "$WORK/$id.tsv" '$2 != "-"')
  # released: the first sample with no requests held after some were
  T_FREE=$(awk -F'\t' 'held && $6 == 0 { print $1; exit } $6 > 0 { held = 1 }' "$WORK/$id.tsv")
  T_FREE=${T_FREE:--}
  FIN=$(tail -1 "$WORK/$id.tsv" | cut -f2)
}

s2() {
  local ns=ff-s2 f=$WORK/s2.yaml
  log "scenario 2: pullcheck inject, backoffLimit 0"
  new_ns $ns
  job_yaml $ns injected "$MISSING" Never 0 | "${INJECT[@]}" -f - >"$f" 2>"$WORK/s2.inject.err"
  run_job s2 $ns injected "$f" 120
  local msg cond; msg=$(term_msg $ns injected); cond=$(job_cond $ns injected)
  row "2" "\`pullcheck inject\`; restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; tag does not exist" \
    "**$FIN** ($cond)" "**${T_FIN} s** (requests released at ${T_FREE} s)" "$(timeline "$WORK/s2.tsv" | md_escape)" \
    "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/s2.tsv")" "$(last_alloc "$WORK/s2.tsv")"
  summary 2 "**With the init container** (2, backoffLimit 0): the Job is Failed **${T_FIN} s** after creation; the pod's requests are released at ${T_FREE} s (pod Failed, exit 11 \`not_found\`)."
  save_detail 2 "Scenario 2: pullcheck init container, backoffLimit 0" $ns injected "$WORK/s2.tsv" "$f" \
    "Job condition: \`$cond\`. Termination message of \`pullcheck\`: \`$msg\`."
}

s3() {
  local ns=ff-s3 f=$WORK/s3.yaml
  log "scenario 3: inject --fail-fast (podFailurePolicy), backoffLimit 6"
  new_ns $ns
  job_yaml $ns policy "$MISSING" Never 6 | "${INJECT[@]}" --fail-fast -f - >"$f" 2>"$WORK/s3.inject.err"
  run_job s3 $ns policy "$f" 120
  local msg cond pods; msg=$(term_msg $ns policy); cond=$(job_cond $ns policy)
  pods=$("${K[@]}" -n $ns get pods -l job-name=policy -o name | wc -l)
  row "3" "\`pullcheck inject --fail-fast\`; restartPolicy Never, backoffLimit 6 + podFailurePolicy (FailJob on 10-14); 1 CPU / 2Gi; tag does not exist" \
    "**$FIN** after $pods pod(s): $(printf '%s' "$cond" | md_escape)" "**${T_FIN} s** (requests released at ${T_FREE} s)" \
    "$(timeline "$WORK/s3.tsv" | md_escape)" "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/s3.tsv")" "$(last_alloc "$WORK/s3.tsv")"
  summary 3 "**With podFailurePolicy** (3, backoffLimit 6): Failed at **${T_FIN} s** on the first pod, reason \`PodFailurePolicy\` (FailJob on exit 11), no retries."
  save_detail 3 "Scenario 3: podFailurePolicy, backoffLimit 6" $ns policy "$WORK/s3.tsv" "$f" \
    "Pods created: $pods. Job condition: \`$cond\`. Termination message: \`$msg\`."
}

s4() { # $1 = count|ignore
  local mode=$1 id=s4$1 ns=ff-s4-$1 f=$WORK/s4$1.yaml backoff extra=
  if [ "$mode" = count ]; then backoff=6; else backoff=0; extra="  activeDeadlineSeconds: 600"; fi
  log "scenario 4 ($mode): workload registry stopped before the Job starts"
  new_ns "$ns"
  job_yaml "$ns" transient "$PRESENT" Never "$backoff" 1 2Gi "$extra" |
    "${INJECT[@]}" --fail-fast --transient "$mode" -f - >"$f" 2>"$WORK/$id.inject.err"
  "$ROOT/scripts/cluster.sh" registry-stop
  ON_FAILED_PODS=2 ON_FAILED_CMD="\"$ROOT/scripts/cluster.sh\" registry-start" run_job "$id" "$ns" transient "$f" 400
  local hook msg cond pods; hook=$(cat "$WORK/$id.tsv.hook" 2>/dev/null || echo -)
  msg=$(term_msg "$ns" transient); cond=$(job_cond "$ns" transient)
  pods=$("${K[@]}" -n "$ns" get pods -l job-name=transient -o json | jq -r '[.items[].status.phase] | group_by(.) | map("\(length) \(.[0])") | join(", ")')
  local failed; failed=$("${K[@]}" -n "$ns" get job transient -o jsonpath='{.status.failed}')
  row "4$([ "$mode" = count ] && echo a || echo b)" "\`inject --fail-fast --transient $mode\`; backoffLimit $backoff${extra:+, activeDeadlineSeconds 600}; present tag, **workload registry stopped** before creation, restarted after 2 failed pods (at ${hook} s)" \
    "**$FIN**: $(printf '%s' "$cond" | md_escape); pods: $pods; Job .status.failed=${failed:-0}" "${T_FIN} s" \
    "$(timeline "$WORK/$id.tsv" | md_escape)" "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/$id.tsv")" "$(last_alloc "$WORK/$id.tsv")"
  summary "4$mode" "**Registry down** (4, \`--transient $mode\`, backoffLimit $backoff): pods exit 20 (transient) and are retried; Job \`.status.failed\` = ${failed:-0}; after the registry restart (${hook} s) the Job is $FIN at ${T_FIN} s."
  save_detail "4$mode" "Scenario 4 ($mode): transient failure, registry restarted at ${hook} s" "$ns" transient "$WORK/$id.tsv" "$f" \
    "Pods: $pods; Job \`.status.failed\` = ${failed:-0}. Job condition: \`$cond\`. Termination messages of \`pullcheck\`: \`$msg\`."
}

s5() {
  local i ns=ff-s5 variant f id
  log "scenario 5: present image, with and without pullcheck (image already on the node after scenario 4)"
  new_ns $ns
  local summary=""
  local -A T5=()
  for i in 1 2; do
    for variant in plain injected; do
      id=s5-$variant-$i f=$WORK/$id.yaml
      if [ $variant = plain ]; then job_yaml $ns "$variant-$i" "$PRESENT" Never 0 >"$f"
      else job_yaml $ns "$variant-$i" "$PRESENT" Never 0 | "${INJECT[@]}" --fail-fast -f - >"$f" 2>/dev/null; fi
      run_job "$id" $ns "$variant-$i" "$f" 120
      local pj init=""
      pj=$("${K[@]}" -n $ns get pods -l "job-name=$variant-$i" -o json)
      if [ $variant = injected ]; then
        init=$(jq -r '.items[0].status.initContainerStatuses[0].state.terminated | "init container ran \(.startedAt) → \(.finishedAt), exit \(.exitCode)"' <<<"$pj")
      fi
      T5[${variant}_$i]=$T_FIN
      summary+="run $i, $variant: Job $FIN at **${T_FIN} s**${init:+; $init}<br>"
      [ "$i" = 2 ] || true
    done
  done
  local dp1 dp2
  dp1=$(awk -v a="${T5[plain_1]}" -v b="${T5[injected_1]}" 'BEGIN { printf "%+.1f", b - a }')
  dp2=$(awk -v a="${T5[plain_2]}" -v b="${T5[injected_2]}" 'BEGIN { printf "%+.1f", b - a }')
  row "5" "present tag \`work/app:v1\` (image cached on the node); 4 Jobs in turn: plain, injected (\`--fail-fast\`), plain, injected" \
    "all Complete" "plain ${T5[plain_1]} / ${T5[plain_2]} s; injected ${T5[injected_1]} / ${T5[injected_2]} s; **pullcheck adds ${dp1} / ${dp2} s**" \
    "$(printf '%s' "$summary" | md_escape)" "—" "$(alloc_str "$WORK/s5-injected-1.tsv")" "$(last_alloc "$WORK/s5-injected-2.tsv")"
  summary 5 "**Present image** (5): Jobs complete in ${T5[plain_1]} / ${T5[plain_2]} s without and ${T5[injected_1]} / ${T5[injected_2]} s with pullcheck: the check adds **${dp1} / ${dp2} s** to a Job's run (image cached on the node)."
  save_detail 5 "Scenario 5: present image" $ns injected-1 "$WORK/s5-injected-1.tsv" "$WORK/s5-injected-1.yaml" \
    "$(printf '%s' "$summary" | sed 's/<br>/\n/g' | sed 's/^/- /')"
}

s6_start() { # $1 = a|b (backoffLimit 0|6); samples every 2 s (6b runs beside the others)
  local v=$1 ns=ff-s6$1 f=$WORK/s6$1.yaml backoff cpu mem max
  if [ "$v" = a ]; then backoff=0 cpu=1 mem=2Gi max=300; else backoff=6 cpu=250m mem=256Mi max=$ONFAILURE_WINDOW; WATCH_EVERY=2; fi
  new_ns "$ns"
  job_yaml "$ns" onfailure "$MISSING" OnFailure "$backoff" "$cpu" "$mem" |
    "${INJECT[@]}" --fail-fast -f - >"$f" 2>"$WORK/s6$v.inject.err"
  run_job "s6$v" "$ns" onfailure "$f" "$max"
  printf '%s\t%s\t%s\n' "$T_FIN" "$T_FREE" "$FIN" >"$WORK/s6$v.result"
}
s6_report() {
  local v=$1 ns=ff-s6$1 backoff; [ "$v" = a ] && backoff=0 || backoff=6
  local T_FIN T_FREE FIN; IFS=$'\t' read -r T_FIN T_FREE FIN <"$WORK/s6$v.result"
  local cond msg restarts warn
  cond=$(job_cond "$ns" onfailure); msg=$(term_msg "$ns" onfailure "$WORK/s6$v.tsv")
  restarts=$(tail -1 "$WORK/s6$v.tsv" | cut -f5)
  warn=$(grep -i warn "$WORK/s6$v.inject.err" | head -2 | md_escape)
  local outcome
  if [ "$FIN" = "-" ]; then outcome="**still active after $(tail -1 "$WORK/s6$v.tsv" | cut -f1) s** (window): $restarts"
  else outcome="**$FIN**: $(printf '%s' "$cond" | md_escape)"; fi
  row "6$v" "\`inject --fail-fast\` (warns, no podFailurePolicy); **restartPolicy OnFailure**, backoffLimit $backoff; $([ "$v" = a ] && echo '1 CPU / 2Gi' || echo '250m / 256Mi'); tag does not exist" \
    "$outcome" "${T_FIN} s$([ "$T_FREE" != - ] && echo " (requests released at ${T_FREE} s)")" \
    "$(timeline "$WORK/s6$v.tsv" | md_escape)" "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/s6$v.tsv")" "$(last_alloc "$WORK/s6$v.tsv")"
  summary "6$v" "**restartPolicy OnFailure, backoffLimit $backoff** (6$v): $([ "$FIN" = - ] && echo "still active at the end of the window" || echo "Failed at **${T_FIN} s**") after $(cut -f5 "$WORK/s6$v.tsv" | grep -o ' r[0-9]*' | tr -d ' r' | sort -n | tail -1) restarts of the failing init container (CrashLoopBackOff), the pod Pending and holding its requests all along."
  save_detail "6$v" "Scenario 6$v: restartPolicy OnFailure, backoffLimit $backoff" "$ns" onfailure "$WORK/s6$v.tsv" "$WORK/s6$v.yaml" \
    "inject's warning: \`$warn\`. Job condition: \`${cond:-none}\`. Termination message: \`$msg\`."
}

# register_webhook Validating|Mutating NAME PATH PORT CA_FILE LABEL_VALUE OPERATIONS: a webhook
# configuration by url (https://127.0.0.1:PORT/PATH) for the Jobs of namespaces labelled
# pullcheck-scenario=LABEL_VALUE; OPERATIONS as YAML list items ('"CREATE", "UPDATE"').
register_webhook() {
  "${K[@]}" apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: ${1}WebhookConfiguration
metadata:
  name: $2
webhooks:
  - name: $3.pullcheck.io
    admissionReviewVersions: ["v1"]
    sideEffects: None
    failurePolicy: Ignore
    timeoutSeconds: 10
    clientConfig:
      url: https://127.0.0.1:$4/$3
      caBundle: $(base64 -w0 <"$5")
    namespaceSelector:
      matchLabels: {pullcheck-scenario: $6}
    rules:
      - apiGroups: ["batch"]
        apiVersions: ["v1"]
        operations: [$7]
        resources: ["jobs"]
EOF
}

s7() {
  local ns=ff-s7 f=$WORK/s7.yaml tls=$WORK/webhook-tls port
  log "scenario 7: admission webhook (validate), registered by url"
  new_ns $ns pullcheck-scenario=admission
  # shellcheck source=scripts/lib.sh
  . "$ROOT/scripts/lib.sh"
  make_tls "$tls"
  port=$(free_port)
  local cp=$PULLCHECK_CLUSTER_DIR/cp
  # shellcheck disable=SC1091
  . "$cp/env"
  printf '%s' "$PULLCHECK_CP_TOKEN" >"$WORK/apiserver.token"
  setsid "$PC" webhook --listen "127.0.0.1:$port" --tls-cert "$tls/server.crt" --tls-key "$tls/server.key" \
    --allow-loopback-registries --insecure-registry "$WREG" \
    --apiserver "$PULLCHECK_CP_SERVER" --apiserver-token-file "$WORK/apiserver.token" --apiserver-ca-file "$cp/pki/ca.crt" \
    </dev/null >"$WORK/webhook.log" 2>&1 &
  WEBHOOK_PID=$!
  local i
  for i in $(seq 1 50); do curl -fsS --cacert "$tls/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  register_webhook Validating pullcheck-scenario validate "$port" "$tls/ca.crt" admission '"CREATE", "UPDATE"'
  sleep 2   # the apiserver's webhook configuration informer
  job_yaml $ns missing "$MISSING" Never 0 >"$f"
  local t0 out rc=0 tdeny
  t0=$(now)
  out=$("${K[@]}" create -f "$f" 2>&1) || rc=$?
  tdeny=$(rel "$t0" "$(now)")
  sleep 10
  local npods njobs
  npods=$("${K[@]}" -n $ns get pods -o name | wc -l)
  njobs=$("${K[@]}" -n $ns get jobs -o name | wc -l)
  local tafter; tafter=$(rel "$t0" "$(now)")
  # and a present image is admitted
  job_yaml $ns present "$PRESENT" Never 0 >"$WORK/s7-present.yaml"
  local t1 admitted; t1=$(now)
  admitted=$("${K[@]}" create -f "$WORK/s7-present.yaml" 2>&1) || true
  local tadm; tadm=$(rel "$t1" "$(now)")
  "${K[@]}" delete validatingwebhookconfiguration pullcheck-scenario >/dev/null
  kill "$WEBHOOK_PID" 2>/dev/null || true; WEBHOOK_PID=
  local outcome
  if [ $rc != 0 ]; then outcome="**rejected** at admission (kubectl exit $rc); $njobs Jobs, **$npods pods** in the namespace 10 s later"
  else outcome="admitted (unexpected): $njobs Jobs, $npods pods"; fi
  row "7" "\`pullcheck webhook\` (enforce, fail-open) as a ValidatingWebhookConfiguration by \`url\`; plain Job, tag does not exist" \
    "$outcome" "**${tdeny} s** (kubectl create round trip); a present tag was admitted in ${tadm} s" "—" \
    "$(printf '%s' "$out" | md_escape)" "0m / 0Mi (never scheduled)" "0m / 0Mi"
  mkdir -p "$WORK/timeline"
  printf '7,0.0,0,0,kubectl create\n' >"$WORK/timeline/7.csv"
  timeline_row 7 "$tdeny" 0 0 "$([ $rc != 0 ] && echo "rejected at admission" || echo "admitted")"
  timeline_row 7 "$tafter" 0 0 "checked: $njobs Jobs; $npods pods"
  summary 7 "**Admission webhook** (7): the Job is rejected in ${tdeny} s (the \`kubectl create\` round trip), $njobs Jobs and $npods pods exist afterwards: no reservation at all."
  {
    echo "### Scenario 7: admission webhook"
    echo
    echo "\`kubectl create -f\` of the missing-image Job (exit $rc, ${tdeny} s):"
    echo
    echo '```'
    printf '%s\n' "$out"
    echo '```'
    echo
    echo "The same Job with the present tag: \`$(printf '%s' "$admitted" | tr '\n' ' ')\` (${tadm} s)."
    echo
  } | detail 7
}

# Scenario 8: Kubeflow training-operator v1 PyTorchJob (scripts/cluster/kubeflow.sh).
pytorchjob_yaml() { # NS NAME RESTART [RUNPOLICY_YAML [CPU MEM]]
  local cpu=${5:-1} mem=${6:-2Gi}
  cat <<EOF
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: $2
  namespace: $1
spec:
${4:-}
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: $3
      template:
        spec:
          hostNetwork: true
          automountServiceAccountToken: false
          terminationGracePeriodSeconds: 1
          containers:
            - name: pytorch
              image: $MISSING
              resources:
                requests: {cpu: "$cpu", memory: $mem}
                limits: {cpu: "$cpu", memory: $mem}
EOF
}
ptj_cond() { # NS NAME -> the True Failed/Succeeded condition of the PyTorchJob
  "${K[@]}" -n "$1" get pytorchjob "$2" -o json | jq -r '
    [.status.conditions[]? | select(.status == "True" and (.type == "Failed" or .type == "Succeeded"))
     | "\(.type) \(.reason // ""): \(.message // "")"] | join("; ")'
}
s8() {
  log "scenario 8: Kubeflow training-operator PyTorchJob"
  if ! "$HERE/cluster/kubeflow.sh" start 2>"$WORK/kubeflow.err"; then
    local why; why=$(tail -3 "$WORK/kubeflow.err" | md_escape)
    row "8" "Kubeflow PyTorchJob" "**not run**: the training operator did not start: $why" "—" "—" "—" "—" "—"
    return 0
  fi
  local WATCH_KIND=PyTorchJob WATCH_RESOURCE=pytorchjobs WATCH_LABEL=training.kubeflow.org/job-name
  # 8a: baseline, as most PyTorchJobs are written (OnFailure, no runPolicy.backoffLimit)
  local ns=ff-s8a f=$WORK/s8a.yaml
  new_ns $ns
  pytorchjob_yaml $ns baseline OnFailure >"$f"
  run_job s8a $ns baseline "$f" "$BASELINE_WINDOW"
  local state8a; state8a=$(tail -1 "$WORK/s8a.tsv" | cut -f4)
  row "8a" "Kubeflow PyTorchJob (training-operator $("$HERE/cluster/node-tools.sh" --versions 2>/dev/null | awk '$1 == "training-operator" {print $2}')), Master ×1, **restartPolicy OnFailure, no runPolicy.backoffLimit**, no pullcheck; 1 CPU / 2Gi; tag does not exist" \
    "**still running after ${BASELINE_WINDOW} s** ($state8a)" "— (never)" "$(timeline "$WORK/s8a.tsv" | md_escape)" "—" \
    "$(alloc_str "$WORK/s8a.tsv")" "still held at ${BASELINE_WINDOW} s: $(last_alloc "$WORK/s8a.tsv")"
  summary 8a "**Kubeflow PyTorchJob, as usually written** (8a, OnFailure, no runPolicy.backoffLimit): after ${BASELINE_WINDOW} s still only \`Created\`, its pod in ImagePullBackOff holding $(alloc_str "$WORK/s8a.tsv")."
  save_detail 8a "Scenario 8a: PyTorchJob baseline" $ns baseline "$WORK/s8a.tsv" "$f"
  "${K[@]}" -n $ns delete pytorchjob baseline --wait=false >/dev/null
  # 8b: pullcheck inject --fail-fast with restartPolicy Never and runPolicy.backoffLimit 0
  ns=ff-s8b f=$WORK/s8b.yaml
  new_ns $ns
  pytorchjob_yaml $ns injected Never "  runPolicy:
    backoffLimit: 0
    cleanPodPolicy: Running" | "${INJECT[@]}" --fail-fast -f - >"$f" 2>"$WORK/s8b.inject.err"
  run_job s8b $ns injected "$f" 180
  local cond msg; cond=$(ptj_cond $ns injected); msg=$(term_msg $ns injected "$WORK/s8b.tsv")
  row "8b" "same PyTorchJob after \`pullcheck inject --fail-fast\`; **restartPolicy Never, runPolicy.backoffLimit 0**, cleanPodPolicy Running" \
    "**$FIN**: $(printf '%s' "$cond" | md_escape)" "**${T_FIN} s**$([ "$T_FREE" != - ] && echo " (requests released at ${T_FREE} s)")" \
    "$(timeline "$WORK/s8b.tsv" | md_escape)" "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/s8b.tsv")" "$(last_alloc "$WORK/s8b.tsv")"
  summary 8b "**PyTorchJob with pullcheck** (8b, Never, runPolicy.backoffLimit 0): Failed at **${T_FIN} s**, requests released at ${T_FREE} s."
  save_detail 8b "Scenario 8b: PyTorchJob with pullcheck" $ns injected "$WORK/s8b.tsv" "$f" \
    "Condition: \`$cond\`. Termination message: \`$msg\`."
  "$HERE/cluster/kubeflow.sh" stop 2>/dev/null || true
}

# ---- scenarios 9 (pullcheck watch) and 10 (inject --transient restart) --------------------
# The watch runs as a host process against the apiserver, with the token of a ServiceAccount
# bound to the RBAC docs/watch.md lists, and acts only in namespaces labelled
# pullcheck.io/watch=on (--namespace-label): every other scenario's namespace is outside it.
WATCH_LABEL_KV=pullcheck.io/watch=on
watch_start() {
  local cp=$PULLCHECK_CLUSTER_DIR/cp port i
  # shellcheck disable=SC1091
  . "$cp/env"
  "${K[@]}" apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: pullcheck-watch}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: pullcheck-watch, namespace: pullcheck-watch}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: pullcheck-watch}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [get, list, watch, delete]}
  - {apiGroups: [""], resources: [pods/status], verbs: [patch]}
  - {apiGroups: [""], resources: [events], verbs: [create, patch]}
  - {apiGroups: [batch], resources: [jobs], verbs: [get]}
  - {apiGroups: [""], resources: [namespaces], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: pullcheck-watch}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pullcheck-watch}
subjects: [{kind: ServiceAccount, name: pullcheck-watch, namespace: pullcheck-watch}]
YAML
  "${K[@]}" -n pullcheck-watch create token pullcheck-watch --duration 3h >"$WORK/watch.token"
  port=$(free_port)
  WATCH_URL=http://127.0.0.1:$port
  RUST_LOG=pullcheck=info setsid "$PC" watch --apiserver "$PULLCHECK_CP_SERVER" \
    --apiserver-token-file "$WORK/watch.token" --apiserver-ca-file "$cp/pki/ca.crt" \
    --namespace-label "$WATCH_LABEL_KV" --listen "127.0.0.1:$port" \
    </dev/null >>"$WORK/watch.log" 2>&1 &
  WATCH_PID=$!
  for i in $(seq 1 100); do curl -fsS "$WATCH_URL/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done
  tail -20 "$WORK/watch.log" >&2; die "pullcheck watch not ready (log $WORK/watch.log)"
}
watch_stop() { [ -z "${WATCH_PID:-}" ] || { kill "$WATCH_PID" 2>/dev/null || true; wait "$WATCH_PID" 2>/dev/null || true; }; WATCH_PID=; }

# epoch seconds of an RFC 3339 timestamp (the watch's log lines start with one)
epoch() { date -d "$1" +%s.%N; }
# watch_t NS PHRASE T0 -> seconds from T0 to the watch's first log line with PHRASE about a pod of NS, or -
watch_t() {
  local line; line=$(grep -F "pod=$1/" "$WORK/watch.log" | grep -F "$2" | head -1 | awk '{print $1}')
  if [ -n "$line" ]; then rel "$3" "$(epoch "$line")"; else echo -; fi
}
# first ErrImagePull / ImagePullBackOff of any of the Job's pods, from the samples
# shellcheck disable=SC2016 # an awk condition: $5 is awk's field
t_err() { first_t "$1" '$5 ~ /W:(ErrImagePull|ImagePullBackOff|InvalidImageName)/'; }
# pullcheck-watch Events in NS: "Reason (object kind): message" per line
watch_events() {
  "${K[@]}" -n "$1" get events -o json | jq -r '[.items[] | select(.source.component == "pullcheck-watch")
    | "\(.reason) on \(.involvedObject.kind): \(.message)"] | unique | join(" / ")'
}
n_events() { # NS REASON -> how many pullcheck-watch Events with that reason
  "${K[@]}" -n "$1" get events -o json | jq --arg r "$2" '[.items[] | select(.source.component == "pullcheck-watch" and .reason == $r)] | length'
}
# node time held: the seconds between samples with requests held in the scenario's namespace
held_s() { awk -F'\t' 'NR > 1 && pc > 0 { s += $1 - pt } { pt = $1; pc = $6 } END { printf "%.0f", s }' "$1"; }
# deleted_seen NS SAMPLES -> how many of the pods in the samples the watch deleted (a pod of an
# earlier run's leftover Job of the same name does not count)
deleted_seen() {
  local sfx n=0
  for sfx in $(cut -f5 "$2" | tr ';' '\n' | sed -n 's/^ *\([a-z0-9]*\):.*/\1/p' | sort -u); do
    grep -F "pod=$1/" "$WORK/watch.log" | grep -qF -- "-$sfx deleted=true" && n=$((n + 1))
  done
  echo "$n"
}
n_pods_seen() { cut -f5 "$1" | tr ';' '\n' | sed -n 's/^ *\([a-z0-9]*\):.*/\1/p' | sort -u | wc -l; }
# The FailJob rule for the watch's condition, as inject --fail-fast writes it (JSON)
watch_rule() {
  job_yaml x x "$MISSING" Never 6 | "${INJECT[@]}" --fail-fast -f - 2>/dev/null |
    kubectl create --dry-run=client -o json -f - |
    jq -c '.spec.podFailurePolicy.rules[] | select(.onPodConditions)'
}
# an index whose only entry is linux/arm64 (the node is linux/amd64), pushed to DEST
push_arm64_index() {
  local dest=$1 w; w=$(mktemp -d "$WORK/arm.XXXXXX")
  mkdir -p "$w/lay/blobs/sha256" "$w/root"
  echo arm64 >"$w/root/ARCH"
  tar -C "$w/root" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" .
  blob() { local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "$w/lay/blobs/sha256/$d"; echo "$d"; }
  local layer cfg man idx
  layer=$(blob "$w/layer.tar")
  jq -cnj --arg l "sha256:$layer" '{architecture:"arm64",os:"linux",config:{},rootfs:{type:"layers",diff_ids:[$l]}}' >"$w/config.json"
  cfg=$(blob "$w/config.json")
  jq -cnj --arg c "sha256:$cfg" --argjson cs "$(stat -c %s "$w/config.json")" --arg l "sha256:$layer" \
    --argjson ls "$(stat -c %s "$w/layer.tar")" '{schemaVersion:2,mediaType:"application/vnd.oci.image.manifest.v1+json",
      config:{mediaType:"application/vnd.oci.image.config.v1+json",digest:$c,size:$cs},
      layers:[{mediaType:"application/vnd.oci.image.layer.v1.tar",digest:$l,size:$ls}]}' >"$w/manifest.json"
  man=$(blob "$w/manifest.json")
  jq -cnj --arg m "sha256:$man" --argjson s "$(stat -c %s "$w/manifest.json")" '{schemaVersion:2,
    mediaType:"application/vnd.oci.image.index.v1+json",manifests:[{mediaType:"application/vnd.oci.image.manifest.v1+json",
      digest:$m,size:$s,platform:{architecture:"arm64",os:"linux"}}]}' >"$w/index.json"
  idx=$(blob "$w/index.json")
  jq -cn --arg i "sha256:$idx" --argjson s "$(stat -c %s "$w/index.json")" '{schemaVersion:2,manifests:[{
    mediaType:"application/vnd.oci.image.index.v1+json",digest:$i,size:$s,annotations:{"org.opencontainers.image.ref.name":"v1"}}]}' \
    >"$w/lay/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$w/lay/oci-layout"
  skopeo copy --quiet --all --dest-tls-verify=false "oci:$w/lay:v1" "docker://$dest"
  rm -rf "$w"
}

# result ID KEY=VALUE...: machine-readable outcome for scripts/watch-node-smoke.sh
result() { local id=$1; shift; mkdir -p "$WORK/results"; printf '%s\n' "$@" >"$WORK/results/$id"; }

# run_watched ID NS JOB MANIFEST MAX: run_job, then T_ERR (first pull failure), T_MARK and T_DEL
# (the watch's log), COND (Job condition), EVENTS (the watch's Events), PODS (pods created)
run_watched() {
  local id=$1 ns=$2 job=$3 f=$4 max=$5 t0
  t0=$(now); "${K[@]}" create -f "$f" >/dev/null
  watch "$ns" "$job" "$t0" "$max" "$WORK/$id.tsv"
  # shellcheck disable=SC2016 # an awk condition: $2 is awk's field
  T_FIN=$(first_t "$WORK/$id.tsv" '$2 != "-"')
  T_FREE=$(awk -F'\t' 'held && $6 == 0 { print $1; exit } $6 > 0 { held = 1 }' "$WORK/$id.tsv"); T_FREE=${T_FREE:--}
  FIN=$(tail -1 "$WORK/$id.tsv" | cut -f2)
  T_DEL=$(watch_t "$ns" "pod deleted" "$t0")
  # The watch deletes within milliseconds of the kubelet's report, often before a 0.5 s sample
  # shows the ErrImagePull: the delete is then the best bound on the first failure.
  T_ERR=$(t_err "$WORK/$id.tsv")
  T_ERR=$(awk -v a="$T_ERR" -v b="$T_DEL" 'BEGIN { if (a == "-") print b; else if (b == "-" || a + 0 <= b + 0) print a; else print b }')
  COND=$("${K[@]}" -n "$ns" get "${WATCH_RESOURCE:-job}" "$job" -o json 2>/dev/null | jq -r '
    [.status.conditions[]? | select(.status == "True" and (.type == "Failed" or .type == "Complete"))
     | "\(.type) \(.reason // ""): \(.message // "")"] | join("; ")' || true)
  EVENTS=$(watch_events "$ns")
  PODS=$(n_pods_seen "$WORK/$id.tsv")
  T_ERR_FIN=$( [ "$T_ERR" != - ] && [ "$T_FIN" != - ] && awk -v a="$T_ERR" -v b="$T_FIN" 'BEGIN { printf "%.1f", b - a }' || echo -)
}
times_str() { # after run_watched: "**T_FIN s** (first ErrImagePull T_ERR s, deleted T_DEL s; ...)"
  printf '**%s s** after create, **%s s** after the first ErrImagePull (at ≤ %s s); the watch deleted the pod at %s s; requests released at %s s' \
    "$T_FIN" "$T_ERR_FIN" "$T_ERR" "$T_DEL" "$T_FREE"
}

s9a() {
  local ns=ff-s9a f=$WORK/s9a.yaml
  log "scenario 9a: watch; plain Job, backoffLimit 0, missing tag"
  new_ns $ns $WATCH_LABEL_KV
  job_yaml $ns plain "$MISSING" Never 0 >"$f"
  run_watched s9a $ns plain "$f" 120
  row "9a" "\`pullcheck watch\`; **plain Job, no inject**, restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; tag does not exist" \
    "**$FIN**: $(printf '%s' "$COND" | md_escape); pods: $PODS" "$(times_str)" "$(timeline "$WORK/s9a.tsv" | md_escape)" \
    "$(printf '%s' "$EVENTS" | md_escape)" "$(alloc_str "$WORK/s9a.tsv")" "$(last_alloc "$WORK/s9a.tsv")"
  summary 9a "**The watch, plain Job** (9a, backoffLimit 0, no inject): Failed at **${T_FIN} s**, ${T_ERR_FIN} s after the first ErrImagePull (${T_ERR} s); requests released at ${T_FREE} s."
  save_detail 9a "Scenario 9a: the watch, plain Job, backoffLimit 0" $ns plain "$WORK/s9a.tsv" "$f" \
    "Job condition: \`$COND\`. The watch's Events: \`$EVENTS\`."
  result 9a "fin=$FIN" "reason=$(printf '%s' "$COND" | awk '{print $2}' | tr -d :)" "t_fin=$T_FIN" "t_err=$T_ERR" "pods=$PODS" "t_free=$T_FREE"
}

s9b() {
  local ns=ff-s9b f=$WORK/s9b.yaml rule
  log "scenario 9b: watch; backoffLimit 6 + the onPodConditions FailJob rule"
  rule=$(watch_rule); [ -n "$rule" ] || die "inject --fail-fast wrote no onPodConditions rule"
  new_ns $ns $WATCH_LABEL_KV
  job_yaml $ns rule "$MISSING" Never 6 1 2Gi "  podFailurePolicy:
    rules: [$rule]" >"$f"
  run_watched s9b $ns rule "$f" 120
  row "9b" "\`pullcheck watch\`; plain Job, restartPolicy Never, **backoffLimit 6 + only the onPodConditions rule** of \`inject --fail-fast\` (\`$rule\`); 1 CPU / 2Gi; tag does not exist" \
    "**$FIN** after $PODS pod(s): $(printf '%s' "$COND" | md_escape)" "$(times_str)" "$(timeline "$WORK/s9b.tsv" | md_escape)" \
    "$(printf '%s' "$EVENTS" | md_escape)" "$(alloc_str "$WORK/s9b.tsv")" "$(last_alloc "$WORK/s9b.tsv")"
  summary 9b "**The watch + the onPodConditions rule** (9b, backoffLimit 6): Failed at **${T_FIN} s** on the first pod ($PODS created), ${T_ERR_FIN} s after the first ErrImagePull, reason \`$(printf '%s' "$COND" | awk '{print $2}' | tr -d :)\`."
  save_detail 9b "Scenario 9b: the watch, backoffLimit 6 + FailJob on the pod condition" $ns rule "$WORK/s9b.tsv" "$f" \
    "Job condition: \`$COND\`. The watch's Events: \`$EVENTS\`."
  result 9b "fin=$FIN" "reason=$(printf '%s' "$COND" | awk '{print $2}' | tr -d :)" "t_fin=$T_FIN" "t_err=$T_ERR" "pods=$PODS" "cond=$COND"
}

# 9c and 9i (OnFailure) retry for minutes: started in the background, reported at the end.
s9c_start() {
  local ns=ff-s9c f=$WORK/s9c.yaml
  new_ns $ns $WATCH_LABEL_KV
  job_yaml $ns retries "$MISSING" Never 6 200m 256Mi >"$f"
  WATCH_EVERY=1 run_watched s9c $ns retries "$f" "$ONFAILURE_WINDOW"
  declare -p T_FIN T_FREE FIN T_ERR T_DEL COND EVENTS PODS T_ERR_FIN >"$WORK/s9c.result"
}
s9c_report() {
  local ns=ff-s9c T_FIN T_FREE FIN T_ERR T_DEL COND EVENTS PODS T_ERR_FIN
  # shellcheck disable=SC1091
  . "$WORK/s9c.result"
  local held deleted; held=$(held_s "$WORK/s9c.tsv"); deleted=$(deleted_seen $ns "$WORK/s9c.tsv")
  row "9c" "\`pullcheck watch\`; plain Job, restartPolicy Never, **backoffLimit 6, no rule**; 200m / 256Mi; tag does not exist; sampled every 1 s" \
    "**$FIN** after $PODS pods ($deleted deleted by the watch): $(printf '%s' "$COND" | md_escape)" \
    "**${T_FIN} s**; requests held **${held} s** in all (node time of the $PODS pods)" "$(timeline "$WORK/s9c.tsv" | md_escape)" \
    "$(printf '%s' "$EVENTS" | cut -c1-400 | md_escape)…" "$(alloc_str "$WORK/s9c.tsv")" "$(last_alloc "$WORK/s9c.tsv")"
  summary 9c "**The watch without the rule** (9c, backoffLimit 6): $PODS pods, each deleted by the watch; Failed at **${T_FIN} s** (the Job controller's back-off between pods), the node held for **${held} s** in all."
  save_detail 9c "Scenario 9c: the watch, backoffLimit 6 without the rule" $ns retries "$WORK/s9c.tsv" "$WORK/s9c.yaml" \
    "Job condition: \`$COND\`. Requests held $held s in all (sum of 1-s sample intervals with requests held)."
}

s9e() {
  local ns_plain=ff-s9e-plain ns_w=ff-s9e-watched i v ns f id text=""
  local -A T9=() F9=()
  log "scenario 9e: present image, plain vs watched namespace"
  new_ns $ns_plain; new_ns $ns_w $WATCH_LABEL_KV
  for i in 1 2; do
    for v in plain watched; do
      ns=ff-s9e-$v id=s9e-$v-$i f=$WORK/$id.yaml
      job_yaml "$ns" "$v-$i" "$PRESENT" Never 0 >"$f"
      run_job "$id" "$ns" "$v-$i" "$f" 120
      T9[${v}_$i]=$T_FIN F9[${v}_$i]=$FIN
      text+="run $i, $v: Job $FIN at **${T_FIN} s**<br>"
    done
  done
  local d1 d2 ev; d1=$(awk -v a="${T9[plain_1]}" -v b="${T9[watched_1]}" 'BEGIN { printf "%+.1f", b - a }')
  d2=$(awk -v a="${T9[plain_2]}" -v b="${T9[watched_2]}" 'BEGIN { printf "%+.1f", b - a }')
  ev=$(watch_events $ns_w)
  row "9e" "\`pullcheck watch\` running; present tag (cached); 4 plain Jobs in turn: outside the watch's namespaces, inside, outside, inside" \
    "${F9[plain_1]} / ${F9[watched_1]} / ${F9[plain_2]} / ${F9[watched_2]}; watch Events: ${ev:-none}" \
    "outside ${T9[plain_1]} / ${T9[plain_2]} s; watched ${T9[watched_1]} / ${T9[watched_2]} s; **difference ${d1} / ${d2} s**" \
    "$(printf '%s' "$text" | md_escape)" "—" "$(alloc_str "$WORK/s9e-watched-1.tsv")" "$(last_alloc "$WORK/s9e-watched-2.tsv")"
  summary 9e "**Present image under the watch** (9e): Jobs complete in ${T9[plain_1]} / ${T9[plain_2]} s outside and ${T9[watched_1]} / ${T9[watched_2]} s inside the watch's namespaces (${d1} / ${d2} s: the sampling noise; the watch writes nothing for a pod that pulls)."
  result 9e "fin=${F9[plain_1]},${F9[watched_1]},${F9[plain_2]},${F9[watched_2]}" "t=${T9[plain_1]},${T9[watched_1]},${T9[plain_2]},${T9[watched_2]}" "events=${ev:-}"
}

s9f() {
  local ns=ff-s9f f=$WORK/s9f.yaml down=${FF_OUTAGE:-30}
  log "scenario 9f: watch at default; workload registry down ${down} s"
  new_ns $ns $WATCH_LABEL_KV
  # a tag the node has never pulled (work/app:v1 is cached there by now, and IfNotPresent
  # would not pull it at all)
  local img; img=$WREG/work/app:outage-$(date +%s)
  skopeo copy --quiet --src-tls-verify=false --dest-tls-verify=false "docker://$PRESENT" "docker://$img"
  job_yaml $ns outage "$img" Never 0 >"$f"
  "$ROOT/scripts/cluster.sh" registry-stop
  ( sleep "$down"; "$ROOT/scripts/cluster.sh" registry-start ) &
  local restarter=$!
  run_watched s9f $ns outage "$f" 240
  wait $restarter || true
  local notact; notact=$(n_events $ns PullcheckNotActing)
  row "9f" "\`pullcheck watch\` at default (no \`--transient-grace\`); plain Job, backoffLimit 0; a tag present in the registry and not on the node, **workload registry stopped** before creation, started again at ${down} s" \
    "**$FIN**: $(printf '%s' "$COND" | md_escape); pods: $PODS; deleted by the watch: $([ "$T_DEL" = - ] && echo none || echo "at $T_DEL s")" \
    "${T_FIN} s (first pull failure ${T_ERR} s)" "$(timeline "$WORK/s9f.tsv" | md_escape)" \
    "$(printf '%s' "$EVENTS" | md_escape)" "$(alloc_str "$WORK/s9f.tsv")" "$(last_alloc "$WORK/s9f.tsv")"
  summary 9f "**Registry down, watch at default** (9f): nothing deleted ($PODS pod, $notact PullcheckNotActing Event); the Job is $FIN at ${T_FIN} s after the registry came back at ${down} s (the kubelet's own pull back-off)."
  save_detail 9f "Scenario 9f: registry down, the watch at default" $ns outage "$WORK/s9f.tsv" "$f" \
    "Job condition: \`$COND\`. The watch's Events: \`$EVENTS\`."
}

s9g() {
  local ns=ff-s9g f=$WORK/s9g.yaml img=$WREG/work/armonly:v1
  log "scenario 9g: watch; an index without linux/amd64"
  push_arm64_index "$img"
  new_ns $ns $WATCH_LABEL_KV
  job_yaml $ns armonly "$img" Never 0 >"$f"
  run_watched s9g $ns armonly "$f" 120
  row "9g" "\`pullcheck watch\`; plain Job, backoffLimit 0; image \`work/armonly:v1\`, an index with **linux/arm64 only** (node linux/amd64)" \
    "**$FIN**: $(printf '%s' "$COND" | md_escape); pods: $PODS" "$(times_str)" "$(timeline "$WORK/s9g.tsv" | md_escape)" \
    "$(printf '%s' "$EVENTS" | md_escape)" "$(alloc_str "$WORK/s9g.tsv")" "$(last_alloc "$WORK/s9g.tsv")"
  summary 9g "**Platform missing** (9g, arm64-only index): Failed at **${T_FIN} s**, ${T_ERR_FIN} s after the first ErrImagePull."
  save_detail 9g "Scenario 9g: the watch, index without the node's platform" $ns armonly "$WORK/s9g.tsv" "$f" \
    "Job condition: \`$COND\`. The watch's Events: \`$EVENTS\`."
}

s9h() {
  local ns=ff-s9h f=$WORK/s9h.yaml window=${FF_NOT_ACTING_WINDOW:-30}
  log "scenario 9h: watch; a Deployment with a missing tag (${window} s)"
  new_ns $ns $WATCH_LABEL_KV
  cat >"$f" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: $ns}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, job-name: web}}
    spec:
      hostNetwork: true
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: $MISSING
          resources:
            requests: {cpu: 250m, memory: 256Mi}
            limits: {cpu: 250m, memory: 256Mi}
YAML
  local t0; t0=$(now); "${K[@]}" create -f "$f" >/dev/null
  # the pods carry job-name=web so the sampler follows them; there is no Job
  watch $ns web "$t0" "$window" "$WORK/s9h.tsv"
  local uids ev n deleting; uids=$("${K[@]}" -n $ns get pods -l app=web -o jsonpath='{.items[*].metadata.uid}' | wc -w)
  deleting=$("${K[@]}" -n $ns get pods -l app=web -o json | jq '[.items[] | select(.metadata.deletionTimestamp)] | length')
  ev=$(watch_events $ns); n=$(n_events $ns PullcheckNotActing)
  local T_ERR; T_ERR=$(t_err "$WORK/s9h.tsv")
  row "9h" "\`pullcheck watch\`; **a Deployment** (1 replica), missing tag, ${window} s window" \
    "pods: $(n_pods_seen "$WORK/s9h.tsv") created, $uids now, $deleting terminating; deleted by the watch: $([ "$(watch_t $ns "pod deleted" "$t0")" = - ] && echo none || echo yes); $n PullcheckNotActing Event(s)" \
    "— (a Deployment never finishes; first ErrImagePull ${T_ERR} s)" "$(timeline "$WORK/s9h.tsv" | md_escape)" \
    "$(printf '%s' "$ev" | md_escape)" "$(alloc_str "$WORK/s9h.tsv")" "$(last_alloc "$WORK/s9h.tsv")"
  summary 9h "**A Deployment** (9h): the watch records $n \`PullcheckNotActing\` Event and deletes nothing (the pod's controller is a ReplicaSet; a PyTorchJob's pod: 9h-pytorch)."
  "${K[@]}" -n $ns delete deployment web --wait=false >/dev/null
}

s9i_start() { # restartPolicy OnFailure, backoffLimit 6, missing tag; in the background
  local ns=ff-s9i f=$WORK/s9i.yaml
  new_ns $ns $WATCH_LABEL_KV
  job_yaml $ns onfailure "$MISSING" OnFailure 6 200m 256Mi >"$f"
  WATCH_EVERY=1 run_watched s9i $ns onfailure "$f" "$ONFAILURE_WINDOW"
  declare -p T_FIN T_FREE FIN T_ERR T_DEL COND EVENTS PODS T_ERR_FIN >"$WORK/s9i.result"
}
s9i_report() {
  local ns=ff-s9i T_FIN T_FREE FIN T_ERR T_DEL COND EVENTS PODS T_ERR_FIN
  # shellcheck disable=SC1091
  . "$WORK/s9i.result"
  local held deleted; held=$(held_s "$WORK/s9i.tsv"); deleted=$(deleted_seen $ns "$WORK/s9i.tsv")
  row "9i" "\`pullcheck watch\`; plain Job, **restartPolicy OnFailure**, backoffLimit 6; 200m / 256Mi; tag does not exist; sampled every 1 s" \
    "**$FIN** after $PODS pods ($deleted deleted by the watch): $(printf '%s' "$COND" | md_escape)" \
    "**${T_FIN} s**; requests held **${held} s** in all" "$(timeline "$WORK/s9i.tsv" | md_escape)" \
    "$(printf '%s' "$EVENTS" | cut -c1-400 | md_escape)…" "$(alloc_str "$WORK/s9i.tsv")" "$(last_alloc "$WORK/s9i.tsv")"
  summary 9i "**The watch, restartPolicy OnFailure** (9i, backoffLimit 6): $PODS pods, each deleted by the watch; $FIN at **${T_FIN} s**, the node held ${held} s in all (compare 6b: one pod held throughout)."
  save_detail 9i "Scenario 9i: the watch, restartPolicy OnFailure, backoffLimit 6" $ns onfailure "$WORK/s9i.tsv" "$WORK/s9i.yaml" \
    "Job condition: \`$COND\`. Requests held $held s in all."
}

s9i_sidecar() { # a native sidecar: how long the deleted pod takes to reach Failed
  local v=$1 ns=ff-s9i-sidecar-$1 f=$WORK/s9i-sidecar-$1.yaml cmd id=s9i-sidecar-$1
  if [ "$v" = term ]; then cmd='trap "exit 0" TERM; while true; do sleep 1; done'
  else cmd='sleep 3600'; fi
  log "scenario 9i-sidecar ($v): native sidecar, missing app image"
  new_ns "$ns" $WATCH_LABEL_KV
  cat >"$f" <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: sidecar, namespace: $ns}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      hostNetwork: true
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 30
      initContainers:
        - name: sidecar
          image: $PRESENT
          restartPolicy: Always
          command: ["/bin/sh", "-c", '$cmd']
      containers:
        - name: main
          image: $MISSING
          resources:
            requests: {cpu: "1", memory: 2Gi}
            limits: {cpu: "1", memory: 2Gi}
YAML
  run_watched "$id" "$ns" sidecar "$f" 120
  local grace; grace=$( [ "$T_DEL" != - ] && [ "$T_FIN" != - ] && awk -v a="$T_DEL" -v b="$T_FIN" 'BEGIN { printf "%.1f", b - a }' || echo -)
  local what; [ "$v" = term ] && what="exits on SIGTERM" || what="ignores SIGTERM (\`sleep\` under sh as PID 1)"
  row "9i-sidecar-$v" "\`pullcheck watch\`; Job with a **native sidecar** (init container \`restartPolicy: Always\`) that $what, terminationGracePeriodSeconds 30; app image: missing tag" \
    "**$FIN**: $(printf '%s' "$COND" | md_escape)" "$(times_str); **delete → Job Failed ${grace} s**" \
    "$(timeline "$WORK/$id.tsv" | md_escape)" "$(printf '%s' "$EVENTS" | md_escape)" "$(alloc_str "$WORK/$id.tsv")" "$(last_alloc "$WORK/$id.tsv")"
  summary "9i-sidecar-$v" "**Native sidecar that $what** (9i): the watch deletes the pod at ${T_DEL} s; Job Failed at ${T_FIN} s: **${grace} s** from delete to Failed."
  save_detail "9i-sidecar-$v" "Scenario 9i: native sidecar ($v)" "$ns" sidecar "$WORK/$id.tsv" "$f" "Job condition: \`$COND\`."
}

# ---- scenario 10: inject --transient restart (KEP-5307 container restart rules) ------------
INJECT_RESTART() { "${INJECT[@]}" --fail-fast --transient restart --kubernetes-version 1.35 -f - 2>"$WORK/$1.inject.err"; }
init_restarts() { # SAMPLES -> the highest restart count of the pullcheck init container seen
  { cut -f5 "$1" | grep -o 'init pullcheck=[^ )]*\( r[0-9]*\)\?' | grep -o ' r[0-9]*' | tr -d ' r' | sort -n | tail -1; } || true
}
s10a() {
  local ns=ff-s10a f=$WORK/s10a.yaml down=${FF_OUTAGE:-30}
  log "scenario 10a: --transient restart; workload registry down ${down} s"
  new_ns $ns
  job_yaml $ns outage "$PRESENT" Never 6 1 2Gi "  activeDeadlineSeconds: 600" | INJECT_RESTART s10a >"$f"
  "$ROOT/scripts/cluster.sh" registry-stop
  ( sleep "$down"; "$ROOT/scripts/cluster.sh" registry-start ) &
  local restarter=$!
  run_job s10a $ns outage "$f" 400
  wait $restarter || true
  local cond msg failed pods r; cond=$(job_cond $ns outage); msg=$(term_msg $ns outage "$WORK/s10a.tsv")
  failed=$("${K[@]}" -n $ns get job outage -o jsonpath='{.status.failed}'); pods=$(n_pods_seen "$WORK/s10a.tsv")
  r=$(init_restarts "$WORK/s10a.tsv")
  row "10a" "\`inject --fail-fast --transient restart\`; restartPolicy Never, backoffLimit 6, activeDeadlineSeconds 600; present tag, **workload registry stopped** before creation, started again at ${down} s" \
    "**$FIN**: $(printf '%s' "$cond" | md_escape); pods created: $pods; init container restarts: ${r:-0}; Job .status.failed=${failed:-0}" "${T_FIN} s" \
    "$(timeline "$WORK/s10a.tsv" | md_escape)" "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/s10a.tsv")" "$(last_alloc "$WORK/s10a.tsv")"
  summary 10a "**Registry down, \`--transient restart\`** (10a): $pods pod, its init container restarted ${r:-0} times in place, Job \`.status.failed\` = ${failed:-0}; $FIN at ${T_FIN} s after the registry came back at ${down} s (compare 4a: new pods, counted failures)."
  save_detail 10a "Scenario 10a: --transient restart, registry down ${down} s" $ns outage "$WORK/s10a.tsv" "$f" \
    "Job condition: \`$cond\`; \`.status.failed\` = ${failed:-0}. Termination messages: \`$msg\`."
}
s10_missing() { # $1 = b (Never) | c (OnFailure: retried for minutes, so run in the background)
  local v=$1 ns=ff-s10$1 f=$WORK/s10$1.yaml policy cpu=1 mem=2Gi max=180
  if [ "$v" = b ]; then policy=Never; else policy=OnFailure cpu=200m mem=256Mi max=$ONFAILURE_WINDOW; local WATCH_EVERY=1; fi
  log "scenario 10$v: --transient restart; missing tag, restartPolicy $policy"
  new_ns "$ns"
  job_yaml "$ns" missing "$MISSING" "$policy" 6 "$cpu" "$mem" "  activeDeadlineSeconds: 1200" | INJECT_RESTART "s10$v" >"$f"
  run_job "s10$v" "$ns" missing "$f" "$max"
  local cond msg pods r; cond=$(job_cond "$ns" missing); msg=$(term_msg "$ns" missing "$WORK/s10$v.tsv")
  pods=$(n_pods_seen "$WORK/s10$v.tsv"); r=$(init_restarts "$WORK/s10$v.tsv")
  local held; held=$(held_s "$WORK/s10$v.tsv")
  row "10$v" "\`inject --fail-fast --transient restart\`; **restartPolicy $policy**, backoffLimit 6, activeDeadlineSeconds 1200; $cpu / $mem; tag does not exist$([ "$v" = c ] && echo "; sampled every 1 s")" \
    "**$FIN**: $(printf '%s' "$cond" | md_escape); pods: $pods; init restarts: ${r:-0}" "**${T_FIN} s**; requests held ${held} s in all" \
    "$(timeline "$WORK/s10$v.tsv" | md_escape)" "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/s10$v.tsv")" "$(last_alloc "$WORK/s10$v.tsv")"
  summary "10$v" "**Missing tag, \`--transient restart\`, restartPolicy $policy** (10$v): $FIN at **${T_FIN} s** after $pods pod(s), ${r:-0} init restarts, the node held ${held} s in all$([ "$v" = c ] && echo "; each pod fails at once, but without a podFailurePolicy (OnFailure forbids it) every failed pod counts toward backoffLimit, so the Job controller retries with new pods under its back-off")."
  save_detail "10$v" "Scenario 10$v: --transient restart, missing tag, $policy" "$ns" missing "$WORK/s10$v.tsv" "$f" \
    "Job condition: \`$cond\`. Termination message: \`$msg\`."
}

# 9d: a registry only the kubelet can read (scripts/cluster.sh with
# PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1: the kubelet's ecr-credential-provider, a scripted
# ECR API, a TLS htpasswd registry under an ECR name). The watch has no registry credential
# and can't even resolve that name: it acts on the kubelet's message alone.
ecr_calls() { wc -l <"$PULLCHECK_ECR_API_LOG"; }
kubelet_failed_msg() { # NS POD_PREFIX -> the kubelet's first Failed event message for those pods
  "${K[@]}" -n "$1" get events -o json | jq -r --arg p "$2" '[.items[] | select(.involvedObject.name | startswith($p))
    | select(.reason == "Failed" and .source.component != "pullcheck-watch") | .message][0] // "-"'
}
s9d() {
  local ns=ff-s9d f=$WORK/s9d.yaml fp=$WORK/s9d-present.yaml
  if [ -z "${PULLCHECK_ECR_HOST:-}" ]; then
    row "9d" "\`pullcheck watch\`; a registry only the kubelet can read (credential provider)" \
      "**not run**: the cluster was started without \`PULLCHECK_CLUSTER_CREDENTIAL_PROVIDER=1\`" "—" "—" "—" "—" "—"
    return 0
  fi
  local img=$PULLCHECK_ECR_HOST/work/app:no-such-tag present=$PULLCHECK_ECR_HOST/work/app:v1
  log "scenario 9d: watch; plain Job on the provider-only registry $PULLCHECK_ECR_HOST, missing tag"
  new_ns $ns $WATCH_LABEL_KV
  local c0 c1 c2; c0=$(ecr_calls)
  job_yaml $ns missing "$img" Never 0 >"$f"
  run_watched s9d $ns missing "$f" 120
  c1=$(ecr_calls)
  local kmsg; kmsg=$(kubelet_failed_msg $ns missing-)
  local m_fin=$FIN m_cond=$COND m_pods=$PODS m_times m_events=$EVENTS m_tfin=$T_FIN m_terrfin=$T_ERR_FIN m_terr=$T_ERR m_free=$T_FREE
  m_times=$(times_str)
  save_detail 9d "Scenario 9d: the watch, a registry only the kubelet can read (credential provider)" $ns missing "$WORK/s9d.tsv" "$f" \
    "Job condition: \`$m_cond\`. The kubelet's message: \`$kmsg\`. The watch's Events: \`$m_events\`. GetAuthorizationToken calls (the kubelet's provider): $((c1 - c0))."
  # the present tag on the same registry: completes, the watch deletes nothing
  job_yaml $ns present "$present" Never 0 >"$fp"
  run_watched s9d-present $ns present "$fp" 120
  c2=$(ecr_calls)
  local p_del; p_del=$(deleted_seen $ns "$WORK/s9d-present.tsv"); [ "$p_del" = 0 ] && p_del=none || p_del="$p_del pod(s)"
  local p_events; p_events=$("${K[@]}" -n $ns get events -o json | jq '[.items[] | select(.source.component == "pullcheck-watch" and (.involvedObject.name | startswith("present-")))] | length')
  row "9d" "\`pullcheck watch\` **holding no registry credential** (it can't resolve the name either); plain Job, no inject, **no pull secret**, restartPolicy Never, backoffLimit 0; 1 CPU / 2Gi; image \`$img\` on a registry only the kubelet can read (\`ecr-credential-provider\`, scripted ECR API, TLS + htpasswd)" \
    "**$m_fin**: $(printf '%s' "$m_cond" | md_escape); pods: $m_pods. The present tag \`work/app:v1\` on it: **$FIN** at ${T_FIN} s, deleted by the watch: $p_del, watch Events on it: $p_events" \
    "$m_times" "$(timeline "$WORK/s9d.tsv" | md_escape)" \
    "kubelet: $(printf '%s' "$kmsg" | md_escape)<br>watch: $(printf '%s' "$m_events" | md_escape)" "$(alloc_str "$WORK/s9d.tsv")" "$(last_alloc "$WORK/s9d.tsv")"
  summary 9d "**The watch, a registry only the kubelet can read** (9d, ECR credential provider, no pull secret, the watch holding no credential): Failed at **${m_tfin} s**, ${m_terrfin} s after the kubelet's first ErrImagePull (${m_terr} s; \"not found\" through the provider's credentials); requests released at ${m_free} s. The present tag there: $FIN at ${T_FIN} s, nothing deleted."
  {
    echo "The present tag \`$present\` on the same registry (manifest as above with \`name: present\`): $FIN at ${T_FIN} s; deleted by the watch: $p_del; watch Events on it: $p_events; condition \`$COND\`. GetAuthorizationToken calls for it: $((c2 - c1)) (the kubelet caches the provider's answer per registry)."
    echo
  } | detail 9d
}

# 9h-pytorch: a Kubeflow v1 PyTorchJob's pod is not a Job's: the watch only says so (Event)
s9h_pytorch() {
  local ns=ff-s9h-pytorch f=$WORK/s9h-pytorch.yaml window=${FF_NOT_ACTING_WINDOW:-30}
  if [ -z "${KUBEFLOW_UP:-}" ]; then
    row "9h-pytorch" "\`pullcheck watch\`; a Kubeflow PyTorchJob" "**not run**: the training operator did not start: $(tail -3 "$WORK/kubeflow2.err" 2>/dev/null | md_escape)" "—" "—" "—" "—" "—"
    return 0
  fi
  local WATCH_KIND=PyTorchJob WATCH_RESOURCE=pytorchjobs WATCH_LABEL=training.kubeflow.org/job-name
  log "scenario 9h-pytorch: watch; a PyTorchJob with a missing tag (${window} s)"
  new_ns $ns $WATCH_LABEL_KV
  pytorchjob_yaml $ns train OnFailure "" 250m 256Mi >"$f"
  local t0; t0=$(now); "${K[@]}" create -f "$f" >/dev/null
  watch $ns train "$t0" "$window" "$WORK/s9h-pytorch.tsv"
  local uids deleting ev n del T_ERR state
  uids=$("${K[@]}" -n $ns get pods -l training.kubeflow.org/job-name=train -o jsonpath='{.items[*].metadata.uid}' | wc -w)
  deleting=$("${K[@]}" -n $ns get pods -l training.kubeflow.org/job-name=train -o json | jq '[.items[] | select(.metadata.deletionTimestamp)] | length')
  ev=$(watch_events $ns); n=$(n_events $ns PullcheckNotActing); del=$(watch_t $ns "pod deleted" "$t0")
  T_ERR=$(t_err "$WORK/s9h-pytorch.tsv"); state=$(tail -1 "$WORK/s9h-pytorch.tsv" | cut -f4)
  local t_ev; t_ev=$(watch_t $ns "PullcheckNotActing" "$t0")
  row "9h-pytorch" "\`pullcheck watch\`; **a Kubeflow v1 PyTorchJob** (training-operator, Master ×1, replica restartPolicy OnFailure, no runPolicy), no inject; 250m / 256Mi; missing tag, ${window} s window" \
    "PyTorchJob \`$state\`; pods: $(n_pods_seen "$WORK/s9h-pytorch.tsv") created, $uids now, $deleting terminating; deleted by the watch: $([ "$del" = - ] && echo none || echo "yes, at $del s"); $n PullcheckNotActing Event(s)" \
    "— (not acted on; first ErrImagePull ${T_ERR} s$([ "$t_ev" = - ] || echo ", the watch's Event logged at $t_ev s"))" "$(timeline "$WORK/s9h-pytorch.tsv" | md_escape)" \
    "$(printf '%s' "$ev" | md_escape)" "$(alloc_str "$WORK/s9h-pytorch.tsv")" "$(last_alloc "$WORK/s9h-pytorch.tsv")"
  summary 9h-pytorch "**A Kubeflow PyTorchJob** (9h-pytorch): the watch records $n \`PullcheckNotActing\` Event and deletes $([ "$del" = - ] && echo nothing || echo "the pod (at $del s)"); after ${window} s the PyTorchJob is \`$state\`, its pod still holding $(alloc_str "$WORK/s9h-pytorch.tsv")."
  save_detail 9h-pytorch "Scenario 9h-pytorch: the watch and a PyTorchJob" $ns train "$WORK/s9h-pytorch.tsv" "$f" \
    "The watch's Events: \`$ev\`."
  "${K[@]}" -n $ns delete pytorchjob train --wait=false >/dev/null
}

# 10d: the PyTorchJob with inject --fail-fast --transient restart under replica OnFailure (the
# Kubeflow default), runPolicy.backoffLimit 6 set explicitly; in the background (the operator
# may retry for minutes). Also records what the API server stored of the init container's
# restart fields: the CRD's schema decides whether restartPolicyRules survives.
s10d() {
  local ns=ff-s10d f=$WORK/s10d.yaml max=${FF_PTJ_WINDOW:-$ONFAILURE_WINDOW}
  if [ -z "${KUBEFLOW_UP:-}" ]; then
    row "10d" "PyTorchJob, \`--transient restart\`, OnFailure" "**not run**: the training operator did not start" "—" "—" "—" "—" "—"
    return 0
  fi
  local WATCH_KIND=PyTorchJob WATCH_RESOURCE=pytorchjobs WATCH_LABEL=training.kubeflow.org/job-name WATCH_EVERY=1
  log "scenario 10d: PyTorchJob, --transient restart, replica OnFailure, runPolicy.backoffLimit 6"
  new_ns $ns
  pytorchjob_yaml $ns restart OnFailure "  runPolicy:
    backoffLimit: 6" 200m 256Mi | INJECT_RESTART s10d >"$f"
  # kubectl's default field validation (Strict) first: the CRD's schema may not know the fields
  local strict strict_rc=0 create_args=
  strict=$("${K[@]}" create --dry-run=server -f "$f" 2>&1) || strict_rc=$?
  if [ "$strict_rc" != 0 ]; then
    log "  strict create rejected: $strict"
    create_args=--validate=false   # what a user gets past the rejection with: unknown fields pruned
  fi
  CREATE_ARGS=$create_args run_job s10d $ns restart "$f" "$max"
  local sent stored_rp stored_rules cond msg pods r held
  sent=$(kubectl create --dry-run=client -o json -f "$f" | jq -c '.spec.pytorchReplicaSpecs.Master.template.spec.initContainers[0] | {restartPolicy, restartPolicyRules}')
  stored_rp=$("${K[@]}" -n $ns get pytorchjob restart -o jsonpath='{.spec.pytorchReplicaSpecs.Master.template.spec.initContainers[0].restartPolicy}')
  stored_rules=$("${K[@]}" -n $ns get pytorchjob restart -o jsonpath='{.spec.pytorchReplicaSpecs.Master.template.spec.initContainers[0].restartPolicyRules}')
  cond=$(ptj_cond $ns restart); msg=$(term_msg $ns restart "$WORK/s10d.tsv")
  pods=$(n_pods_seen "$WORK/s10d.tsv"); r=$(init_restarts "$WORK/s10d.tsv"); held=$(held_s "$WORK/s10d.tsv")
  local t_podfail
  # shellcheck disable=SC2016 # an awk condition: $3 is awk's field
  t_podfail=$(first_t "$WORK/s10d.tsv" '$3 > 0')
  local how="created with kubectl's default (Strict) field validation"
  [ "$strict_rc" = 0 ] || how="**rejected** by kubectl create (Strict field validation): \`$(printf '%s' "$strict" | md_escape)\`; then created with \`kubectl create --validate=false\` (unknown fields pruned)"
  row "10d" "Kubeflow PyTorchJob (Master ×1) after \`inject --fail-fast --transient restart\`; **replica restartPolicy OnFailure**, runPolicy.backoffLimit 6 (set); 200m / 256Mi; tag does not exist; sampled every 1 s; $how" \
    "**${FIN}**: $(printf '%s' "$cond" | md_escape); pods: $pods; init restarts: ${r:-0}; first pod Failed at ${t_podfail} s. Stored init container: restartPolicy \`${stored_rp:-none}\`, restartPolicyRules \`${stored_rules:-none (pruned)}\` (sent: \`$sent\`)" \
    "**${T_FIN} s**; requests held ${held} s in all" "$(timeline "$WORK/s10d.tsv" | md_escape)" \
    "$(printf '%s' "$msg" | md_escape)" "$(alloc_str "$WORK/s10d.tsv")" "$(last_alloc "$WORK/s10d.tsv")"
  summary 10d "**PyTorchJob, \`--transient restart\`, replica OnFailure** (10d, runPolicy.backoffLimit 6): $([ "$strict_rc" = 0 ] || echo "kubectl create **rejects** it (the CRD's schema has no restartPolicyRules: strict decoding error); with --validate=false (rules pruned): ")first pod Failed at ${t_podfail} s (${r:-0} init restarts), $pods pod(s) in all, PyTorchJob $FIN at **${T_FIN} s**, the node held ${held} s; the API server stored restartPolicy \`${stored_rp:-none}\` and restartPolicyRules \`${stored_rules:-none}\` (the CRD's pod template schema decides)."
  save_detail 10d "Scenario 10d: PyTorchJob, --transient restart, replica OnFailure" $ns restart "$WORK/s10d.tsv" "$f" \
    "The manifest was $how. Condition: \`$cond\`. Termination message: \`$msg\`. Init container as sent: \`$sent\`; as stored: restartPolicy \`${stored_rp:-none}\`, restartPolicyRules \`${stored_rules:-none}\`."
}

# Scenario 11: Docker Hub's pull quota on the node. scripts/cluster/dockerhub-standin.py is a
# scripted stand-in (Docker Hub's quota headers are a vendor's behaviour no real registry
# shows) in front of the real workload registry; containerd and both pullchecks go through it.
# The index offers linux/arm64 only; the node is linux/amd64. The webhook (cluster platforms
# amd64 + arm64) admits and mutates the Job while the stand-in states 50 pulls left; then 5 are
# left (the nodes' egress address is not the webhook's), below the default margin of 10.
# 11a: the webhook handed the index body to the init container (pullcheck.io/index-bodies);
# 11b: `pullcheck inject` alone (no body to hand over).
hub_gets() { # FROM_LINE UA_PREFIX -> manifest GETs in the stand-in's log after line FROM_LINE
  tail -n +"$(($1 + 1))" "$HUBLOG" | awk -F'\t' -v ua="$2" '$1 ~ /^GET .*\/manifests\// && index($2, ua) == 1' | wc -l
}
s11() {
  local ns=ff-s11 tls=$WORK/webhook-tls port hub f=$WORK/s11a.yaml f2=$WORK/s11b.yaml quota=$WORK/s11.quota
  log "scenario 11: Docker Hub quota on the node (scripted stand-in), index bodies handed over"
  HUBLOG=$WORK/s11.hub.log
  push_arm64_index "$WREG/hub/armonly:v1"
  hub=127.0.0.1:$(free_port)
  echo 50 >"$quota"; : >"$HUBLOG"
  python3 "$ROOT/scripts/cluster/dockerhub-standin.py" "${hub#*:}" "$WREG" "$quota" "$HUBLOG" &
  HUB_PID=$!
  HUB_HOSTS_DIR=$PULLCHECK_CLUSTER_DIR/containerd/certs.d/$hub
  mkdir -p "$HUB_HOSTS_DIR"
  printf 'server = "http://%s"\n\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' "$hub" "$hub" >"$HUB_HOSTS_DIR/hosts.toml"
  local i
  for i in $(seq 1 50); do curl -fsS "http://$hub/v2/" >/dev/null 2>&1 && break; sleep 0.1; done
  # shellcheck source=scripts/lib.sh
  . "$ROOT/scripts/lib.sh"
  [ -f "$tls/ca.crt" ] || make_tls "$tls"
  port=$(free_port)
  setsid "$PC" webhook --listen "127.0.0.1:$port" --tls-cert "$tls/server.crt" --tls-key "$tls/server.key" \
    --allow-loopback-registries --insecure-registry "$hub" --metered-registry "$hub" --fail-fast --transient count \
    --inject-image "$PC_IMAGE" "--inject-check-arg=--insecure-registry=$hub" "--inject-check-arg=--metered-registry=$hub" \
    </dev/null >"$WORK/s11.webhook.log" 2>&1 &
  WEBHOOK_PID=$!
  for i in $(seq 1 50); do curl -fsS --cacert "$tls/ca.crt" "https://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  register_webhook Mutating pullcheck-scenario-11 mutate "$port" "$tls/ca.crt" hub '"CREATE"'
  sleep 2   # the apiserver's webhook configuration informer
  new_ns $ns pullcheck-scenario=hub
  local image=$hub/hub/armonly:v1 t0 mark webhook_gets node_gets ann
  # 11a: created (the webhook mutates it, paying one GET from its 50), then 5 left for the node
  job_yaml $ns handed-over "$image" Never 6 1 2Gi >"$f"
  mark=$(wc -l <"$HUBLOG")
  t0=$(now); "${K[@]}" create -f "$f" >/dev/null
  echo 5 >"$quota"
  webhook_gets=$(hub_gets "$mark" pullcheck/)
  mark=$(wc -l <"$HUBLOG")
  watch $ns handed-over "$t0" 120 "$WORK/s11a.tsv"
  # shellcheck disable=SC2016 # an awk condition: $2 is awk's field
  T_FIN=$(first_t "$WORK/s11a.tsv" '$2 != "-"'); FIN=$(tail -1 "$WORK/s11a.tsv" | cut -f2)
  node_gets=$(hub_gets "$mark" pullcheck/)
  ann=$("${K[@]}" -n $ns get job handed-over -o jsonpath="{.spec.template.metadata.annotations['pullcheck\.io/index-bodies']}" | jq -c 'keys')
  local cond msg; cond=$(job_cond $ns handed-over); msg=$(term_msg $ns handed-over "$WORK/s11a.tsv")
  "${K[@]}" -n $ns get job handed-over -o yaml >"$WORK/s11a.stored.yaml"
  result 11a "fin=$FIN" "t_fin=$T_FIN" "webhook_gets=$webhook_gets" "node_gets=$node_gets" "annotation=$ann"
  row "11a" "\`pullcheck webhook --fail-fast --metered-registry\` (mutating); **Docker Hub stand-in**: 50 pulls left at admission, **5 on the node** (margin 10); index with linux/arm64 only, amd64 node; backoffLimit 6" \
    "**$FIN** ($(printf '%s' "$cond" | md_escape)); manifest GETs: webhook $webhook_gets, node's pullcheck **$node_gets**; annotation pullcheck.io/index-bodies holds $ann" \
    "**${T_FIN} s**" "$(timeline "$WORK/s11a.tsv" | md_escape)" "$(printf '%s' "$msg" | md_escape)" \
    "$(alloc_str "$WORK/s11a.tsv")" "$(last_alloc "$WORK/s11a.tsv")"
  summary 11a "**Docker Hub quota, body handed over** (11a): with 5 pulls left on the node (below the margin) the init container verified the platform from the webhook's index body with HEADs only ($node_gets manifest GETs on the node) and the Job is $FIN at **${T_FIN} s** (exit 12, platform missing)."
  save_detail 11a "Scenario 11a: Docker Hub quota on the node, the webhook's index body handed over" $ns handed-over "$WORK/s11a.tsv" "$WORK/s11a.stored.yaml" \
    "The manifest below is the Job as stored (mutated by the webhook). Condition: \`$cond\`. Termination message: \`$msg\`. Manifest GETs through the stand-in: webhook $webhook_gets (at admission, 50 pulls left), the node's pullcheck $node_gets (5 left)."
  # 11b: the same Job injected by `pullcheck inject` (no body), in a namespace the webhook skips
  local ns2=ff-s11b
  new_ns $ns2
  echo 5 >"$quota"
  job_yaml $ns2 inject-only "$image" Never 6 1 2Gi |
    "$PC" inject --fail-fast --image "$PC_IMAGE" "--check-arg=--insecure-registry=$hub" "--check-arg=--metered-registry=$hub" -f - >"$f2" 2>"$WORK/s11b.inject.err"
  mark=$(wc -l <"$HUBLOG")
  t0=$(now); "${K[@]}" create -f "$f2" >/dev/null
  watch $ns2 inject-only "$t0" 40 "$WORK/s11b.tsv"
  # shellcheck disable=SC2016 # an awk condition: $2 is awk's field
  T_FIN=$(first_t "$WORK/s11b.tsv" '$2 != "-"'); FIN=$(tail -1 "$WORK/s11b.tsv" | cut -f2)
  node_gets=$(hub_gets "$mark" pullcheck/)
  local kubelet_msg state; kubelet_msg=$(kubelet_failed_msg $ns2 inject-only)
  state=$(tail -1 "$WORK/s11b.tsv" | cut -f5)
  result 11b "fin=$FIN" "node_gets=$node_gets" "state=$state"
  row "11b" "the same Job after \`pullcheck inject --fail-fast\` only (no index body); 5 pulls left on the node" \
    "**still active after 40 s**: $(printf '%s' "$state" | md_escape); the init container passed (platform not verified, $node_gets manifest GETs), the kubelet: $(printf '%s' "$kubelet_msg" | md_escape)" \
    "— (never)" "$(timeline "$WORK/s11b.tsv" | md_escape)" "—" "$(alloc_str "$WORK/s11b.tsv")" "$(last_alloc "$WORK/s11b.tsv")"
  summary 11b "**Docker Hub quota, no body** (11b): the same Job injected by \`pullcheck inject\` alone passes its init container (platform not verified: 5 pulls left) and is **still active after 40 s**, its pod in ImagePullBackOff holding $(alloc_str "$WORK/s11b.tsv") (the watch would act on it: scenario 9)."
  save_detail 11b "Scenario 11b: Docker Hub quota on the node, no index body" $ns2 inject-only "$WORK/s11b.tsv" "$f2" \
    "The kubelet's first Failed event: \`$kubelet_msg\`."
  "${K[@]}" -n $ns2 delete job inject-only --wait=false >/dev/null
  "${K[@]}" delete mutatingwebhookconfiguration pullcheck-scenario-11 >/dev/null
  kill "$WEBHOOK_PID" 2>/dev/null || true; WEBHOOK_PID=
  kill "$HUB_PID" 2>/dev/null || true; HUB_PID=
  rm -rf "$HUB_HOSTS_DIR"; HUB_HOSTS_DIR=
}

# ---- run -------------------------------------------------------------------------------
T_ALL=$(now)
if has 6; then
  log "scenario 6b (OnFailure, backoffLimit 6) runs in the background beside the others, up to ${ONFAILURE_WINDOW}s"
  ( s6_start b ) >"$WORK/s6b.log" 2>&1 &
  S6B_PID=$!
fi
has 1 && s1
has 2 && s2
has 3 && s3
if has 4; then s4 count; s4 ignore; fi
has 5 && s5
if has 6; then log "scenario 6a: OnFailure, backoffLimit 0"; s6_start a; s6_report a; fi
has 7 && s7
has 8 && s8
if has 9h-pytorch || has 10d; then
  log "training operator for 9h-pytorch / 10d (scripts/cluster/kubeflow.sh)"
  if "$HERE/cluster/kubeflow.sh" start 2>"$WORK/kubeflow2.err"; then KUBEFLOW_UP=1; fi
fi
if has 9a || has 9b || has 9c || has 9d || has 9e || has 9f || has 9g || has 9h || has 9h-pytorch || has 9i; then
  log "scenario 9: pullcheck watch (host process, ServiceAccount token, namespaces labelled $WATCH_LABEL_KV)"
  watch_start
fi
# first the two that stop the workload registry (it would turn the others' missing tags transient)
has 10a && s10a
has 9f && s9f
has 11 && s11
# then the ones that retry for minutes, in the background beside the rest
if has 9c; then log "scenario 9c (backoffLimit 6, no rule) in the background"; ( s9c_start ) >"$WORK/s9c.log" 2>&1 & S9C_PID=$!; fi
if has 9i; then log "scenario 9i (OnFailure, backoffLimit 6) in the background"; ( s9i_start ) >"$WORK/s9i.log" 2>&1 & S9I_PID=$!; fi
if has 10c; then log "scenario 10c (restart, OnFailure) in the background"; ( s10_missing c ) >"$WORK/s10c.log" 2>&1 & S10C_PID=$!; fi
if has 10d; then log "scenario 10d (PyTorchJob, restart, OnFailure) in the background"; ( s10d ) >"$WORK/s10d.log" 2>&1 & S10D_PID=$!; fi
has 10b && s10_missing b
has 9a && s9a
has 9b && s9b
has 9d && s9d
has 9e && s9e
has 9g && s9g
has 9h && s9h
has 9h-pytorch && s9h_pytorch
if has 9i; then s9i_sidecar term; s9i_sidecar ignore; fi
if [ -n "${S9C_PID:-}" ]; then log "waiting for scenario 9c"; wait "$S9C_PID" || log "9c exited with $?"; S9C_PID=; s9c_report; fi
if [ -n "${S9I_PID:-}" ]; then log "waiting for scenario 9i"; wait "$S9I_PID" || log "9i exited with $?"; S9I_PID=; s9i_report; fi
if [ -n "${S10C_PID:-}" ]; then log "waiting for scenario 10c"; wait "$S10C_PID" || log "10c exited with $?"; S10C_PID=; fi
if [ -n "${S10D_PID:-}" ]; then log "waiting for scenario 10d"; wait "$S10D_PID" || log "10d exited with $?"; S10D_PID=; fi
if [ -n "${KUBEFLOW_UP:-}" ]; then "$HERE/cluster/kubeflow.sh" stop 2>/dev/null || true; KUBEFLOW_UP=; fi
watch_stop
if has 6; then
  log "waiting for scenario 6b (pid $S6B_PID)"
  wait "$S6B_PID" || log "scenario 6b exited with $?"; S6B_PID=
  s6_report b
fi
T_TOTAL=$(rel "$T_ALL" "$(now)")
# what this run was, for a later FF_MERGE of its FF_WORK
printf 'the run of %s (%s s, scenarios: %s)\n' "$(date -u +%Y-%m-%d)" "$T_TOTAL" "$SCENARIOS" >"$WORK/run.txt"

# ---- the document ----------------------------------------------------------------------
kv() { "$1" --version 2>/dev/null | head -1; }
{
  cat <<EOF
# Fail-fast on a real node: measured results

Generated by \`scripts/fail-fast-scenarios.sh\` on $(date -u +%Y-%m-%d) (total run ${T_TOTAL} s$([ -z "$MERGE" ] || echo ", scenarios $SCENARIOS only; every other row, summary line and detail is kept from $MERGED_FROM with \`FF_MERGE\`; the setup below is this run's")); do not edit by hand.
Regenerate with one command (as root; the cluster is built, started and torn down by
\`scripts/cluster.sh\`; Go builds are cached in \`~/.cache/pullcheck-tools\`):

\`\`\`sh
scripts/fail-fast-scenarios.sh
\`\`\`

## Summary

![Requests held on the node against seconds since kubectl create: without pullcheck 1 CPU / 2 GiB for the whole run; with the init container for about 3 s; with the webhook never](fail-fast-timeline.svg)

The chart is drawn by \`scripts/chart.py\` from \`docs/fail-fast-data/timeline.csv\`, which this run also wrote.

EOF
  for r in 1 2 3 4count 4ignore 5 6a 6b 7 8a 8b 9a 9b 9c 9d 9e 9f 9g 9h 9h-pytorch 9i 9i-sidecar-term 9i-sidecar-ignore 10a 10b 10c 10d 11a 11b; do cat "$WORK/summary/$r" 2>/dev/null || true; done
  cat <<EOF

## Setup

- Single node \`$PULLCHECK_NODE\` on loopback, built by \`scripts/cluster.sh up\`: etcd, kube-apiserver
  (\`scripts/control-plane.sh\`), kube-controller-manager, kube-scheduler, kubelet, containerd + runc,
  CNI bridge/host-local/loopback; no kube-proxy, no DNS.
- Versions: Kubernetes $(kubectl version -o json 2>/dev/null | jq -r '.serverVersion.gitVersion') (kubelet $(kubelet --version 2>/dev/null | awk '{print $2}'),
  kubectl $(kubectl version --client -o json | jq -r .clientVersion.gitVersion)), etcd $(etcd --version 2>/dev/null | awk '/etcd Version/ {print $3}'),
  containerd $(containerd --version 2>/dev/null | awk '{print $3}'), runc $(runc --version | awk 'NR==1 {print $3}') (Debian),
  CNI plugins $(dpkg-query -W -f '${Version}' containernetworking-plugins 2>/dev/null) (Debian), docker-registry $(dpkg-query -W -f '${Version}' docker-registry 2>/dev/null) (Debian),
  $("$PC" --version), image \`$PC_IMAGE\`.
- Host: $(uname -sr), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); cgroup $( [ -f /sys/fs/cgroup/cgroup.controllers ] && echo v2 || echo v1) with the
  cgroupfs driver (no systemd), kubelet \`failCgroupV1: false\`; node allocatable $(kubectl get node "$PULLCHECK_NODE" -o jsonpath='{.status.allocatable.cpu} CPU, {.status.allocatable.memory}').
- Registries: Debian \`docker-registry\`, plain HTTP: infrastructure \`$IREG\` (pause, pullcheck; never
  stopped) and workload \`$WREG\` (\`work/app:v1\` = busybox-static running \`echo ok\`; stopped in scenario 4).
- Every Job: \`hostNetwork: true\`, \`automountServiceAccountToken: false\`, requests = limits.
  The missing tag is \`$MISSING\`.
- Injection: \`pullcheck inject [--fail-fast] --image $PC_IMAGE --check-arg=--insecure-registry=$WREG -f job.yaml\`.
- Measurement: \`kubectl get pods,jobs -A -o json\` every ~0.5 s (2 s for 6b); times are from just
  before \`kubectl create\`, so they include kubectl's own round trip (~0.1–0.3 s here). "Requests"
  are the effective requests (max of the app containers' sum and the largest init container) of
  the scenario's non-terminal pods bound to the node — the numbers the scheduler and
  \`kubectl describe node\` count. Scenario 6b runs beside the others with small requests, so the
  node-wide figure in parentheses includes it.

## Results

| # | setting | outcome | time to Job Failed / Complete | pod timeline (t in s: pods, Job conditions) | termination message | requests held during | requests after |
|---|---|---|---|---|---|---|---|
EOF
  for r in 1 2 3 4a 4b 5 6a 6b 7 8 8a 8b 9a 9b 9c 9d 9e 9f 9g 9h 9h_pytorch 9i 9i_sidecar_term 9i_sidecar_ignore 10a 10b 10c 10d 11a 11b; do cat "$WORK/rows/$r" 2>/dev/null || true; done
  cat <<'EOF'

Pod states: `W:` waiting (reason), `T:` terminated (exit code), `r` restart count; `init pullcheck`
is the injected init container.

## What it took to run a kubelet here

Constraints of this host found on the way, and what `scripts/cluster.sh` does about them:

- **cgroup v1, no systemd**: kubelet 1.35 starts on cgroup v1 only with `failCgroupV1: false`;
  kubelet and containerd use the cgroupfs driver (runc `SystemdCgroup = false`).
- **Debian's containerd 1.6.20 is too old** for kubelet 1.35: containerd v2.2.9 and its
  runc shim are built from the Go module proxy with `CGO_ENABLED=0` and the tags
  `no_btrfs no_devmapper no_zfs no_aufs` (`scripts/cluster/node-tools.sh`); Debian's runc
  1.1.5 runs the containers.
- **root lacks CAP_SYS_RESOURCE** in this sandbox, so runc cannot lower a process's
  `oom_score_adj` below 0, and every pod sandbox failed with `can't get final child's PID
  from pipe: EOF` (runc --debug: `failed to update /proc/self/oom_score_adj: Permission
  denied`; the kubelet asks -998 for sandboxes). Fix: containerd's
  `restrict_oom_score_adj = true` clamps the value to containerd's own score.
- **the kubelet refuses a loopback node IP**: the node's InternalIP is 10.244.230.1, an address
  added to `lo` (reachable only from this host), and the kubelet serves there; the apiserver
  reaches it with `--kubelet-preferred-address-types=InternalIP` (no DNS for the node name).
- No image from outside: the sandbox image is a 20-line static C `pause`
  (`scripts/cluster/pause.c`, musl-gcc), the workload image is Debian's busybox-static.

## Scenario 8: how the training operator runs here

`scripts/cluster/kubeflow.sh` (called by scenario 8) applies the PyTorchJob CRD from
`../shared/crds` (training-operator v1.9.0's) and runs training-operator v1.9.3, built from
the Go module proxy (`scripts/cluster/node-tools.sh training-operator`). Its webhook server
listens on every interface (not configurable), so it runs in a network namespace of its own
and reaches the loopback-only apiserver through a forwarder on the host side of a veth pair;
its cert rotation is satisfied with a throwaway serving cert in a private tmpfs and a
ValidatingWebhookConfiguration without webhooks (PyTorchJobs are not validated here). The
PyTorchJobs have one Master replica only: a Worker would get the operator's own init
container, which waits for the Master's DNS name (no cluster DNS here).

## Details

EOF
  for d in 1 2 3 4count 4ignore 5 6a 6b 7 8a 8b 9a 9b 9c 9d 9e 9f 9g 9h 9h-pytorch 9i 9i-sidecar-term 9i-sidecar-ignore 10a 10b 10c 10d 11a 11b; do cat "$WORK/details/$d" 2>/dev/null || true; done
} >"$OUT.new"
mv "$OUT.new" "$OUT"
log "wrote $OUT (total ${T_TOTAL}s)"

# The chart's data, then the chart (README shows it; .ci/run re-renders it from this file).
mkdir -p "$(dirname "$DATA")"
{
  echo "# pullcheck fail-fast timelines: the requests the scenario's pods hold on the node."
  echo "# source: recorded by scripts/fail-fast-scenarios.sh on $(date -u +%Y-%m-%d) (the run behind docs/fail-fast-results.md)."
  echo "# t: seconds from just before \`kubectl create\`; cpu_m, mem_mi: effective requests (millicores, MiB) of the scenario's"
  echo "# non-terminal pods bound to the node; event: what changed (pods, the Job's terminal condition, admission)."
  echo "scenario,t,cpu_m,mem_mi,event"
  for r in 1 2 3 4count 4ignore 5 6a 6b 7 8a 8b 9a 9b 9c 9d 9e 9f 9g 9h 9h-pytorch 9i 9i-sidecar-term 9i-sidecar-ignore 10a 10b 10c 10d 11a 11b; do cat "$WORK/timeline/$r.csv" 2>/dev/null || true; done
} >"$DATA.new"
mv "$DATA.new" "$DATA"
python3 "$ROOT/scripts/chart.py" --data "$DATA" --out "$CHART"
log "wrote $DATA and $CHART"
