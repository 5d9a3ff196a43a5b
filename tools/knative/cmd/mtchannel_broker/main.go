// Command mtchannel_broker is Knative Eventing's Broker and Trigger controller
// (knative.dev/eventing/cmd/mtchannel_broker v0.50.0) without the health-probe server on a
// hard-coded :8080 and without Kubernetes Events (internal.Context).
package main

import (
	"github.com/async-helm/async-helm/tools/knative/cmd/internal"

	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/reconciler/broker"
	mttrigger "knative.dev/eventing/pkg/reconciler/broker/trigger"
	filteredFactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"
)

func main() {
	ctx := signals.NewContext()
	ctx = filteredFactory.WithSelectors(ctx, auth.OIDCLabelSelector)
	ctx = internal.Context(ctx, "mt-broker-controller")
	sharedmain.MainWithContext(ctx, "mt-broker-controller", broker.NewController, mttrigger.NewController)
}
