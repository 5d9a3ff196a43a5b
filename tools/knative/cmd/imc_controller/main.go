// Command imc_controller is Knative Eventing's InMemoryChannel controller
// (knative.dev/eventing/cmd/in_memory/channel_controller v0.50.0) without its admission
// webhooks (nothing here calls them: no webhook configuration is installed) and without the
// health-probe server on a hard-coded :8080.
package main

import (
	inmemorychannel "knative.dev/eventing/pkg/reconciler/inmemorychannel/controller"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"
)

func main() {
	ctx := sharedmain.WithHealthProbesDisabled(signals.NewContext())
	sharedmain.MainWithContext(ctx, "inmemorychannel-controller", inmemorychannel.NewController)
}
