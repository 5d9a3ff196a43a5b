#!/usr/bin/env bash
# The product's story with oc-helm, run by `make demo` inside make run's stack (which sets
# ASYNC_HELM_SERVER, ASYNC_HELM_TOKEN, KUBECONFIG, DEMO_NAMESPACE and DEMO_PROFILE): GitLab
# 6.5.4 installed with --wait, pending-install for minutes while progress moves, listed
# meanwhile, deployed; then an upgrade, the history, and an uninstall.
# On the gitlab pod profile (the default; DEMO_SPEED=fast for a quick run) GitLab's
# workloads become ready staggered, as on a real cluster (internal/podprofile).
set -euo pipefail
NS=${DEMO_NAMESPACE:-demo}
NAME=gitlab-$(date +%s | tail -c 5)
VALUES=testdata/charts/gitlab-values-offline.yaml
# Nothing hands out load-balancer addresses on the local cluster: the ingress controller is a NodePort.
LB=nginx-ingress.controller.service.type=NodePort
CHART=(local/gitlab --version 6.5.4 -f "$VALUES" --set "$LB")

T0=$SECONDS
elapsed() { local s=$((SECONDS - T0)); printf '%d:%02d' $((s / 60)) $((s % 60)); }
# On a terminal each step shows its elapsed time; make demo-doc's transcript stamps every line.
stamp() { if [ -t 1 ]; then printf '[%s] ' "$(elapsed)"; fi; }
say() { printf '\n'; stamp; printf '# %s\n' "$*"; }
oc() { stamp; printf '$ oc helm -n %s %s\n' "$NS" "$*"; bin/oc-helm -n "$NS" "$@"; }

echo "== demo: GitLab 6.5.4 in namespace $NS (pod profile ${DEMO_PROFILE:-fast})"
say "Install. submit answers at once with the release secret; --wait follows the install to the end."
oc install "$NAME" "${CHART[@]}" --wait --wait-for-jobs --timeout 15m &
install=$!

sleep 20
say "Meanwhile, from another terminal: the release is listed as pending-install, and status says what it waits on."
oc list
oc status "$NAME"
say "Back to the install (--wait):"
wait "$install"

say "Deployed:"
oc list
say "Upgrade with a changed value; --wait follows it."
oc upgrade "$NAME" "${CHART[@]}" --set global.hosts.domain=example.net --wait --wait-for-jobs --timeout 15m
oc history "$NAME"
say "Uninstall; --wait follows it until the release is gone."
oc uninstall "$NAME" --wait
oc list
say "Done in $(elapsed)."
