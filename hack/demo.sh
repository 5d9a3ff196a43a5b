#!/usr/bin/env bash
# The product's story with oc-helm: install the GitLab chart, see it pending-install, see it
# deployed, upgrade it, list again. Run by `make demo` inside make run's stack
# (ASYNC_HELM_SERVER and KUBECONFIG are set by it).
set -euo pipefail
oc() { echo "\$ oc helm $*"; bin/oc-helm "$@"; echo; }
NS=${DEMO_NAMESPACE:-demo}
NAME=gitlab-$(date +%s | tail -c 5)
VALUES=testdata/charts/gitlab-values-offline.yaml
# Nothing hands out load-balancer addresses on the local cluster: the ingress controller is a NodePort.
LB=nginx-ingress.controller.service.type=NodePort

oc -n "$NS" install "$NAME" local/gitlab --version 6.5.4 -f "$VALUES" --set "$LB" --wait-for-jobs --timeout 15m
oc -n "$NS" list
oc -n "$NS" status "$NAME" --watch
oc -n "$NS" list
oc -n "$NS" upgrade "$NAME" local/gitlab --version 6.5.4 -f "$VALUES" --set "$LB" --set global.hosts.domain=example.net --wait --timeout 15m
oc -n "$NS" list
oc -n "$NS" history "$NAME"
