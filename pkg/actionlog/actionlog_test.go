package actionlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
)

// Helm v3's two lines that print whole objects: the Secrets driver's decode failure (the
// Secret, data included) and the waiter's "Resource details" (a resource.Info).
func TestFormatRedactsObjectsAndKeepsNamesCountsErrors(t *testing.T) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1"},
		Data: map[string][]byte{"password": []byte("hunter2")}}
	type info struct{ Name, Data string }
	for _, c := range []struct {
		format string
		args   []any
		want   string
	}{
		{"list: failed to decode release: %v: %s", []any{secret, errors.New("bad gzip")}, "list: failed to decode release: [redacted]: bad gzip"},
		{"list: failed to decode release: %v: %s", []any{*secret, "x"}, "list: failed to decode release: [redacted]: x"},
		{"Error received when checking status of resource %s. Error: '%s', Resource details: '%s'",
			[]any{"web", errors.New("boom"), &info{"web", "hunter2"}},
			"Error received when checking status of resource web. Error: 'boom', Resource details: '[redacted]'"},
		{"creating %d resource(s)", []any{14}, "creating 14 resource(s)"},
		{"beginning wait for %d resources with timeout of %v", []any{3, 90 * time.Second}, "beginning wait for 3 resources with timeout of 1m30s"},
		{"Deployment is not ready: %s/%s. %d out of %d expected pods are ready", []any{"ns", "web", int32(0), int32(1)},
			"Deployment is not ready: ns/web. 0 out of 1 expected pods are ready"},
		{"Ignoring delete failure for %q %s: %v", []any{"web", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, errors.New("gone")},
			`Ignoring delete failure for "web" apps/v1, Kind=Deployment: gone`},
		{"Created a new %s called %q in %s\n", []any{"Deployment", "web", "ns"}, `Created a new Deployment called "web" in ns`},
	} {
		got := Format(c.format, c.args...)
		if got != c.want {
			t.Errorf("Format(%q):\n got %q\nwant %q", c.format, got, c.want)
		}
		if strings.Contains(got, "hunter2") {
			t.Errorf("secret data in %q", got)
		}
	}
	if got := Format("%s", strings.Repeat("é", 5000)); len(got) > maxArgBytes+len("…") {
		t.Errorf("an argument of 10000 bytes kept %d", len(got))
	}
}

func TestBufferBoundsBytesDeduplicatesAndNumbers(t *testing.T) {
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	b := NewBuffer(10*(lineOverhead+12), clock) // ten lines of 10 bytes, quoted
	b.Append("first line")
	for i := 0; i < 3; i++ {
		clock.Add(2 * time.Second)
		b.Append("not ready!")
	}
	lines, dropped, _ := b.Snapshot()
	if len(lines) != 2 || lines[1].Repeated != 2 || lines[1].Seq != 2 || !lines[1].Last.Equal(clock.Now()) || dropped != 0 {
		t.Fatalf("repeats not kept once with their count: %+v", lines)
	}
	for i := 0; i < 20; i++ {
		b.Append(fmt.Sprintf("line %5d", i))
	}
	lines, dropped, _ = b.Snapshot()
	if len(lines) != 10 || dropped != 12 || lines[0].Seq != 13 || lines[9].Seq != 22 || lines[9].Text != "line    19" {
		t.Fatalf("ring of 10 lines: got %d lines (first seq %d), %d dropped", len(lines), lines[0].Seq, dropped)
	}
	if tail := Tail(lines, 3, 1<<10); len(tail) != 3 || tail[2].Seq != 22 {
		t.Errorf("tail of 3: %+v", tail)
	}
	if tail := Tail(lines, 10, 25); len(tail) != 2 {
		t.Errorf("tail bounded at 25 bytes kept %d lines", len(tail))
	}
}

func TestStoreWritesReadsLatestAndPrunes(t *testing.T) {
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	kc := fakekube.New(clock)
	store := &Store{Client: kc.Typed(), Namespace: "async-helm"}
	ctx := context.Background()
	for rev := 1; rev <= 4; rev++ {
		clock.Add(time.Minute)
		buf := NewBuffer(0, clock)
		w := NewWriter(store, buf, Record{Namespace: "team", Name: "web", Revision: rev, RequestID: fmt.Sprint("req", rev), Action: "upgrade"}, clock)
		buf.Append(fmt.Sprintf("revision %d", rev))
		if err := w.Flush(ctx, false); err != nil {
			t.Fatal(err)
		}
		buf.Append("done")
		if err := w.Flush(ctx, rev != 4); err != nil {
			t.Fatal(err)
		}
	}
	got, err := store.Get(ctx, "team", "web", 2)
	if err != nil || got.Running || len(got.Lines) != 2 || got.Lines[0].Text != "revision 2" || got.RequestID != "req2" {
		t.Fatalf("revision 2: %+v %v", got, err)
	}
	latest, err := store.Latest(ctx, "team", "web")
	if err != nil || latest.Revision != 4 || !latest.Running {
		t.Fatalf("latest: %+v %v", latest, err)
	}
	if _, err := store.Get(ctx, "team", "other", 1); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("no log: %v, want ErrNotFound", err)
	}
	if err := store.Prune(ctx, "team", "web", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, "team", "web", 2); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 2 kept beyond the 2 most recent: %v", err)
	}
	if _, err := store.Get(ctx, "team", "web", 3); err != nil {
		t.Errorf("revision 3 pruned: %v", err)
	}
	clock.Add(time.Hour)
	if n, err := store.PruneOlder(ctx, clock.Now().Add(-30*time.Minute)); err != nil || n != 2 {
		t.Errorf("pruned by age %d (%v), want 2", n, err)
	}
}

type denyAll struct{ asked int }

func (d *denyAll) Check(ctx context.Context, u *auth.User, needs ...auth.Need) error {
	d.asked++
	if needs[0].Verb != "list" || needs[0].Resource != "secrets" || needs[0].Namespace != "team" {
		return fmt.Errorf("unexpected need %+v", needs[0])
	}
	return fmt.Errorf("%w: no", auth.ErrForbidden)
}

func TestReaderAuthorizesFirstAndFollowsAfter(t *testing.T) {
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	kc := fakekube.New(clock)
	store := &Store{Client: kc.Typed(), Namespace: "async-helm"}
	ctx := context.Background()
	buf := NewBuffer(0, clock)
	w := NewWriter(store, buf, Record{Namespace: "team", Name: "web", Revision: 1}, clock)
	for _, l := range []string{"a", "b", "c"} {
		buf.Append(l)
	}
	if err := w.Flush(ctx, false); err != nil {
		t.Fatal(err)
	}
	deny := &denyAll{}
	r := &Reader{Store: store, Authorizer: deny, Clock: clock}
	kc.ClearActions()
	if _, err := r.Read(ctx, &auth.User{Name: "dev"}, Query{Namespace: "team", Name: "none"}); !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("forbidden caller: %v", err)
	}
	if n := len(kc.Actions()); n != 0 {
		t.Errorf("a forbidden caller's read made %d API calls", n)
	}
	r.Authorizer = nil
	got, err := r.Read(ctx, &auth.User{Name: "dev"}, Query{Namespace: "team", Name: "web", After: 1})
	if err != nil || len(got.Lines) != 2 || got.Lines[0].Text != "b" || !got.Running {
		t.Fatalf("after 1: %+v %v", got, err)
	}
	clock.Add(StaleAfter)
	if got, _ = r.Read(ctx, nil, Query{Namespace: "team", Name: "web", Revision: 1}); got.Running {
		t.Errorf("a log unwritten for %s is answered running", StaleAfter)
	}
	if _, err := r.Read(ctx, nil, Query{Namespace: "team", Name: "web", Revision: 2}); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("no such revision: %v", err)
	}
}

// A release name from the query that is no label value cannot widen the selector: no log.
func TestLatestOfANameThatIsNoLabelValue(t *testing.T) {
	kc := fakekube.New(fakekube.NewClock(time.Now()))
	store := &Store{Client: kc.Typed(), Namespace: "async-helm"}
	w := NewWriter(store, NewBuffer(0, nil), Record{Namespace: "team", Name: "web", Revision: 1}, nil)
	if err := w.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web,async-helm.io/log-revision", "web!=x", strings.Repeat("w", 70)} {
		if _, err := store.Latest(context.Background(), "team", name); !errors.Is(err, release.ErrNotFound) {
			t.Errorf("Latest(%q): %v, want ErrNotFound", name, err)
		}
	}
}
