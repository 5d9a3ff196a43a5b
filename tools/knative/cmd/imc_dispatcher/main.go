// Command imc_dispatcher is Knative Eventing's InMemoryChannel dispatcher
// (knative.dev/eventing/cmd/in_memory/channel_dispatcher v0.50.0). Upstream it listens on
// the constants 8080 and 8443; the build (knative prepare) uses a copy of the module that makes
// them the settings IMC_DISPATCHER_PORT and IMC_DISPATCHER_PORT_HTTPS.
// No health-probe server on a hard-coded :8080 and no Kubernetes Events (internal.Context).
// NAMESPACE is deliberately not read: with it the dispatcher watches one namespace only.
package main

import (
	"github.com/async-helm/async-helm/tools/knative/cmd/internal"

	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/eventingtls"
	inmemorychannel "knative.dev/eventing/pkg/reconciler/inmemorychannel/dispatcher"
	filteredFactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"
)

func main() {
	ctx := signals.NewContext()
	ctx = filteredFactory.WithSelectors(ctx, auth.OIDCLabelSelector, eventingtls.TrustBundleLabelSelector)
	ctx = internal.Context(ctx, "inmemorychannel-dispatcher")
	sharedmain.MainWithContext(ctx, "inmemorychannel-dispatcher", inmemorychannel.NewController)
}
