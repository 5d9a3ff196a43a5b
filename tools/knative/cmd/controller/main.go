// Command controller is Knative Eventing's core controller (knative.dev/eventing/cmd/controller
// v0.50.0) with the same reconcilers, minus the health-probe server that upstream binds to a
// hard-coded :8080 (on one machine every controller would race for that port) and without
// Kubernetes Events (internal.Context).
package main

import (
	"github.com/async-helm/async-helm/tools/knative/cmd/internal"

	"knative.dev/eventing/pkg/apis/sinks"
	"knative.dev/eventing/pkg/auth"
	"knative.dev/eventing/pkg/certificates"
	eventingfilteredfactory "knative.dev/eventing/pkg/client/injection/informers/factory/filtered"
	"knative.dev/eventing/pkg/eventingtls"
	"knative.dev/eventing/pkg/reconciler/apiserversource"
	"knative.dev/eventing/pkg/reconciler/channel"
	"knative.dev/eventing/pkg/reconciler/containersource"
	"knative.dev/eventing/pkg/reconciler/eventpolicy"
	"knative.dev/eventing/pkg/reconciler/eventtransform"
	"knative.dev/eventing/pkg/reconciler/eventtype"
	integrationsink "knative.dev/eventing/pkg/reconciler/integration/sink"
	integrationsource "knative.dev/eventing/pkg/reconciler/integration/source"
	"knative.dev/eventing/pkg/reconciler/jobsink"
	"knative.dev/eventing/pkg/reconciler/parallel"
	"knative.dev/eventing/pkg/reconciler/pingsource"
	"knative.dev/eventing/pkg/reconciler/requestreply"
	"knative.dev/eventing/pkg/reconciler/sequence"
	sourcecrd "knative.dev/eventing/pkg/reconciler/source/crd"
	"knative.dev/eventing/pkg/reconciler/subscription"
	sugarnamespace "knative.dev/eventing/pkg/reconciler/sugar/namespace"
	sugartrigger "knative.dev/eventing/pkg/reconciler/sugar/trigger"
	kubefilteredfactory "knative.dev/pkg/client/injection/kube/informers/factory/filtered"
	"knative.dev/pkg/injection/sharedmain"
	"knative.dev/pkg/signals"
)

func main() {
	ctx := signals.NewContext()
	ctx = kubefilteredfactory.WithSelectors(ctx,
		auth.OIDCLabelSelector,
		eventingtls.TrustBundleLabelSelector,
		sinks.JobSinkJobsLabelSelector,
		eventtransform.JsonataResourcesSelector,
		certificates.SecretLabelSelectorPair,
		requestreply.SecretLabelSelector,
	)
	ctx = eventingfilteredfactory.WithSelectors(ctx, eventtransform.JsonataResourcesSelector)
	ctx = internal.Context(ctx, "controller")
	sharedmain.MainWithContext(ctx, "controller",
		channel.NewController,
		subscription.NewController,
		eventtype.NewController,
		eventpolicy.NewController,
		parallel.NewController,
		sequence.NewController,
		apiserversource.NewController,
		pingsource.NewController,
		containersource.NewController,
		integrationsource.NewController,
		sourcecrd.NewController,
		jobsink.NewController,
		integrationsink.NewController,
		sugarnamespace.NewController,
		sugartrigger.NewController,
		eventtransform.NewController,
		requestreply.NewController,
	)
}
