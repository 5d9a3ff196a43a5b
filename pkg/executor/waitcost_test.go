package executor

import (
	"encoding/json"
	"runtime"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// An accepted event whose values are `{"x": [{"a":0}, {"a":0}, …]}` (1.25 MiB): its decoded
// action holds ~40 times its bytes (48 MiB). The waiting room charged it three times its
// bytes (3.7 MiB: 34 such deliveries held 1.6 GiB); it charges what the decoded values hold.
func TestAWaitingDeliveryIsChargedWhatItsDecodedValuesHold(t *testing.T) {
	// `{"a":0},` is 8 bytes: 1.25 MiB of values, so the reservation Secret that stores the
	// event raw (release.DataEvent) stays under etcd's 1.5 MiB request bound.
	const n = 160_000
	list := make([]any, n)
	for i := range list {
		list[i] = map[string]any{"a": 0}
	}
	a := events.Action{Action: release.ActionInstall, Namespace: "mallory", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "0123456789abcdef01234567",
		Values: map[string]any{"x": list}, Caller: events.Caller{User: "mallory"}}
	body, _ := json.Marshal(api.ReleaseRequest{Name: "web", Namespace: "mallory", ChartURL: "https://x/c.tgz", Values: a.Values})
	e, err := events.NewAccepted(a)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	list, a, e = nil, events.Action{}, cloudevents.Event{}
	var got cloudevents.Event // as the executor's receiver has it
	if err := json.Unmarshal(stored, &got); err != nil {
		t.Fatal(err)
	}
	before := heapAfterGC()
	parsed, err := events.ParseAccepted(got)
	if err != nil {
		t.Fatal(err)
	}
	held := int64(heapAfterGC()) - int64(before)
	runtime.KeepAlive(parsed)
	charged := waitCost(stored)
	room := int64(128 << 20)
	fit := room / charged
	t.Logf("request body %d KiB (limit %d KiB), event %d KiB: charged %d KiB in the waiting room; the decoded action holds %d MiB",
		len(body)>>10, api.MaxBodyBytes>>10, len(stored)>>10, charged>>10, held>>20)
	t.Logf("MAX_WAITING_BYTES (128 MiB) admits %d such deliveries: %d MiB of decoded values, beside the event bytes (%d MiB); the executor's limit is 2 GiB (GOMEMLIMIT 1600 MiB)",
		fit, fit*held>>20, fit*2*int64(len(stored))>>20)
	if held > charged {
		t.Errorf("a waiting delivery's decoded values hold %d MiB, charged %d MiB", held>>20, charged>>20)
	}
}
