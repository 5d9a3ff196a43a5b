package actionlog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/auth"
)

// onlyTeam lets the caller read releases of namespace "team" only.
type onlyTeam struct{}

func (onlyTeam) Check(_ context.Context, _ *auth.User, needs ...auth.Need) error {
	for _, n := range needs {
		if n.Namespace != "team" {
			return fmt.Errorf("%w: not in %s", auth.ErrForbidden, n.Namespace)
		}
	}
	return nil
}

// Attack: dev, who may read releases of "team" only, asks submit's log route for the log of
// "victim"/"web" with names crafted against the ConfigMap's hashed name ("ns/name/revision")
// and against the label selector of the latest log. Each answer is a refusal or "no log";
// no line of the victim's log comes back.
func TestLogOfAnotherNamespaceIsNotReadThroughCraftedNames(t *testing.T) {
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	kc := fakekube.New(clock)
	store := &Store{Client: kc.Typed(), Namespace: "async-helm"}
	ctx := context.Background()
	buf := NewBuffer(0, clock)
	w := NewWriter(store, buf, Record{Namespace: "victim", Name: "web", Revision: 1, RequestID: "v"}, clock)
	buf.Append("victim's secret line")
	if err := w.Flush(ctx, false); err != nil {
		t.Fatal(err)
	}
	r := &Reader{Store: store, Authorizer: onlyTeam{}, Clock: clock}
	dev := &auth.User{Name: "dev"}
	for _, q := range []Query{
		{Namespace: "victim", Name: "web"},
		{Namespace: "victim", Name: "web", Revision: 1},
		{Namespace: "team", Name: "../victim/web", Revision: 1},
		{Namespace: "team", Name: "web/../../victim/web", Revision: 1},
		{Namespace: "team", Name: "web,async-helm.io/log-namespace=victim"},
		{Namespace: "team", Name: "web,async-helm.io/log-namespace!=team"},
		{Namespace: "team,victim", Name: "web"},
	} {
		got, err := r.Read(ctx, dev, q)
		if err == nil {
			for _, l := range got.Lines {
				if strings.Contains(l.Text, "victim") {
					t.Errorf("%+v: dev read %q", q, l.Text)
				}
			}
		}
	}
}
