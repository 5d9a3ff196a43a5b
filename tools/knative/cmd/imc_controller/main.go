// Command imc_controller is Knative Eventing's InMemoryChannel controller
// (knative.dev/eventing/cmd/in_memory/channel_controller v0.50.0) without its admission
// webhooks (nothing here calls them: no webhook configuration is installed) and without the
// health-probe server on a hard-coded :8080 and without Kubernetes Events (internal.Context).
package main

import (
	"github.com/async-helm/async-helm/tools/knative/cmd/internal"

	inmemorychannel "knative.dev/eventing/pkg/reconciler/inmemorychannel/controller"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"
)

func main() {
	ctx := internal.Context(signals.NewContext(), "inmemorychannel-controller")
	sharedmain.MainWithContext(ctx, "inmemorychannel-controller", inmemorychannel.NewController)
}
