package knative

import (
	"context"
	"encoding/json"
	"sort"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	eventingv1 "knative.dev/eventing/pkg/apis/eventing/v1"
	"knative.dev/eventing/pkg/eventfilter"
	"knative.dev/eventing/pkg/eventfilter/attributes"
	"knative.dev/eventing/pkg/eventfilter/subscriptionsapi"

	"github.com/async-helm/async-helm/pkg/events"
)

// routedTrigger is a Trigger of the manifests with its filter as the Broker's filter
// builds it (Knative's own filter code: `filters` wins over `filter`).
type routedTrigger struct {
	name, subscriber string
	filter           eventfilter.Filter
}

func routedTriggers(t *testing.T) []routedTrigger {
	t.Helper()
	var out []routedTrigger
	for _, u := range manifests(t) {
		if u.GetKind() != "Trigger" {
			continue
		}
		var tr eventingv1.Trigger
		raw, _ := json.Marshal(u.Object)
		if err := json.Unmarshal(raw, &tr); err != nil {
			t.Fatalf("Trigger %s: %v", u.GetName(), err)
		}
		var f eventfilter.Filter
		switch {
		case len(tr.Spec.Filters) > 0:
			f = subscriptionsapi.CreateSubscriptionsAPIFilters(zap.NewNop(), tr.Spec.Filters)
		case tr.Spec.Filter != nil:
			f = attributes.NewAttributesFilter(tr.Spec.Filter.Attributes)
		default:
			t.Fatalf("Trigger %s has no filter: every event of the Broker would reach %v", tr.Name, tr.Spec.Subscriber.Ref)
		}
		sub := tr.Spec.Subscriber.Ref.Name
		if tr.Spec.Subscriber.URI != nil {
			sub += tr.Spec.Subscriber.URI.String()
		}
		out = append(out, routedTrigger{name: tr.Name, subscriber: sub, filter: f})
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.filter.Cleanup()
		}
	})
	return out
}

// The Broker delivers each event type of async-helm to exactly the subscriber that acts on
// it, once, and nothing else to anyone: the accepted actions to the executor; request events
// (pipelines send them to submit with their token: a Broker forwards no Authorization),
// status and progress events, and types that only resemble ours, to no Trigger of
// config/knative.
func TestTriggersRouteEachTypeToItsSubscriberOnce(t *testing.T) {
	want := map[string]string{
		events.TypeInstallAccepted:                 "executor",
		events.TypeUpgradeAccepted:                 "executor",
		events.TypeUninstallAccepted:               "executor",
		events.TypeRollbackAccepted:                "executor",
		events.TypeInstallRequested:                "",
		events.TypeUpgradeRequested:                "",
		events.TypeStatusPrefix + "deployed":       "",
		events.TypeProgress:                        "",
		events.TypeReserved:                        "",
		"dev.asynchelm.release.install.accepted.x": "",
		"x.dev.asynchelm.release.install.accepted": "",
		"dev.asynchelm.release.delete.accepted":    "",
		"dev.asynchelm.release.install.requestedx": "",
	}
	triggers := routedTriggers(t)
	for typ, sub := range want {
		e := cloudevents.NewEvent()
		e.SetID("1")
		e.SetSource("/test")
		e.SetType(typ)
		var got []string
		for _, r := range triggers {
			if r.filter.Filter(context.Background(), e) == eventfilter.PassFilter {
				got = append(got, r.name+"->"+r.subscriber)
			}
		}
		sort.Strings(got)
		switch {
		case sub == "" && len(got) > 0:
			t.Errorf("%s reaches %v, want no Trigger", typ, got)
		case sub != "" && len(got) != 1:
			t.Errorf("%s reaches %v, want exactly one Trigger to %s", typ, got, sub)
		case sub != "" && got[0][len(got[0])-len(sub):] != sub:
			t.Errorf("%s reaches %v, want %s", typ, got, sub)
		}
	}
}

// One Trigger per subscriber: the in-memory channel hands every event to every Trigger of
// the Broker, whose filter then drops it, so each Trigger costs each event a delivery and
// a filter pass (docs/benchmarks.md, "CPU per 201").
func TestOneTriggerPerSubscriber(t *testing.T) {
	per := map[string][]string{}
	for _, r := range routedTriggers(t) {
		per[r.subscriber] = append(per[r.subscriber], r.name)
	}
	for sub, names := range per {
		if len(names) > 1 {
			t.Errorf("subscriber %s has %d Triggers %v, want one whose filters match all its types", sub, len(names), names)
		}
	}
}
