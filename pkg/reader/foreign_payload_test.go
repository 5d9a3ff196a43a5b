package reader

import (
	"context"
	"strconv"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// forge writes, in namespace ns, a release Secret named secret whose labels say release
// name, revision v (as Helm labels its own) and whose payload is payload: a tenant writes
// whatever it likes into the Secrets of its own namespace.
func forge(t *testing.T, cl *fakekube.Cluster, ns, secret, name string, v int, payload *helmrelease.Release) {
	t.Helper()
	data, err := release.EncodeRelease(payload)
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: ns, Labels: map[string]string{
		release.LabelOwner: release.OwnerHelm, release.LabelName: name, release.LabelVersion: strconv.Itoa(v),
		release.LabelStatus: payload.Info.Status.String()}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": data}}
	if _, err := cl.Typed().CoreV1().Secrets(ns).Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// helmRecords writes records as Helm's own Secrets driver does, each in its namespace.
func helmRecords(t *testing.T, cl *fakekube.Cluster, rels ...*helmrelease.Release) {
	t.Helper()
	for _, r := range rels {
		if err := storage.NewSecrets(cl.Typed().CoreV1().Secrets(r.Namespace)).Create(release.SecretName(r.Name, r.Version), r); err != nil {
			t.Fatal(err)
		}
	}
}

func limitedRows(t *testing.T, s *Service, u *auth.User, ns string) []api.ReleaseInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := s.List(ctx, u, ns, true)
	if err != nil {
		t.Fatal(err)
	}
	return got.([]api.ReleaseInfo)
}

// A record in evil whose payload names victim/web v99 must not stand for victim's web in a
// list of every namespace (it replaced victim's deployed revision 2 before): its payload
// is not bound to the Secret it is in, as Helm's guarded reads refuse (release.GuardedSecrets).
// Each path of the lean list: the whole-record list, the metadata index, and the index
// narrowed to a caller's namespaces.
func TestLimitedListIgnoresForeignPayloadAcrossNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name      string
		withIndex bool
		user      *auth.User
	}{{"without index", false, nil}, {"with index", true, nil}, {"with index, caller's namespaces", true, &auth.User{Name: "alice"}}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := fakekube.New(fakekube.NewClock(time.Now()))
			helmRecords(t, cl, rel("victim", "web", 1, helmrelease.StatusSuperseded), rel("victim", "web", 2, helmrelease.StatusDeployed))
			forge(t, cl, "evil", release.SecretName("web", 99), "web", 99, rel("victim", "web", 99, helmrelease.StatusFailed))
			store := &release.Store{Client: cl.Typed(), Metadata: cl.Metadata()}
			s := &Service{Secrets: store}
			if tc.withIndex {
				s.Index = store
				s.Authorizer = &authz{may: map[string]map[string]bool{"alice": {"victim": true, "evil": true}}}
			}
			rows := limitedRows(t, s, tc.user, "")
			if len(rows) != 1 || rows[0].Namespace != "victim" || rows[0].Name != "web" || rows[0].Version != 2 ||
				rows[0].Info.Status != helmrelease.StatusDeployed {
				t.Fatalf("rows %s, want only victim/web v2 deployed", asJSON(t, rows))
			}
			// Cached heads answer the next list: the forged one still stands for nothing, and
			// with the index it is not fetched again.
			cl.ClearActions()
			if again := limitedRows(t, s, tc.user, ""); asJSON(t, again) != asJSON(t, rows) {
				t.Fatalf("second list %s, first %s", asJSON(t, again), asJSON(t, rows))
			}
			if g, _ := gets(cl); tc.withIndex && g != 0 {
				t.Errorf("second list: %d GETs of secrets, want 0 (every head cached)", g)
			}
		})
	}
}

// A reader of evil listing evil must not learn victim's queue: a record in evil whose
// payload names victim/db v1 pending-install made the list ask the queue index for victim's
// position (and show it, with victim's namespace, as a row of evil's list).
func TestLimitedListOfOwnNamespaceDoesNotShowAnotherNamespacesQueue(t *testing.T) {
	cl := fakekube.New(fakekube.NewClock(time.Now()))
	helmRecords(t, cl, rel("victim", "db", 1, helmrelease.StatusPendingInstall), rel("evil", "app", 1, helmrelease.StatusDeployed))
	forge(t, cl, "evil", release.SecretName("db", 1), "db", 1, rel("victim", "db", 1, helmrelease.StatusPendingInstall))
	accepted := time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC)
	idx := &queueAt{at: map[string]ledger.Position{
		"victim/" + release.SecretName("db", 1): {Position: 7, Total: 40, AcceptedAt: accepted}}}
	store := &release.Store{Client: cl.Typed(), Metadata: cl.Metadata()}
	for _, withIndex := range []bool{false, true} {
		s := &Service{Secrets: store, Queue: &Queue{Index: idx, Clock: testingclock.NewFakePassiveClock(accepted.Add(time.Minute))}}
		if withIndex {
			s.Index = store
		}
		idx.asked = nil
		rows := limitedRows(t, s, nil, "evil")
		for _, r := range rows {
			if r.Namespace != "evil" || r.Queue != nil {
				t.Errorf("index %v: row %s/%s v%d with queue %+v in evil's list", withIndex, r.Namespace, r.Name, r.Version, r.Queue)
			}
		}
		for _, a := range idx.asked {
			if a != "evil/"+release.SecretName("db", 1) {
				t.Errorf("index %v: queue index asked for %s in evil's list", withIndex, a)
			}
		}
		if len(rows) != 1 || rows[0].Name != "app" {
			t.Errorf("index %v: rows %s, want evil's app only", withIndex, asJSON(t, rows))
		}
	}
}

// A payload with no namespace is in its Secret's namespace (as GuardedSecrets reads it),
// so two namespaces' such records are two rows; a payload naming another release or
// revision than its Secret's name is left out, in its own namespace too.
func TestLimitedListBindsPayloadsToTheirSecret(t *testing.T) {
	for _, withIndex := range []bool{false, true} {
		cl := fakekube.New(fakekube.NewClock(time.Now()))
		helmRecords(t, cl, rel("team-a", "web", 2, helmrelease.StatusDeployed))
		forge(t, cl, "team-a", release.SecretName("solo", 1), "solo", 1, rel("", "solo", 1, helmrelease.StatusDeployed))
		forge(t, cl, "team-b", release.SecretName("solo", 3), "solo", 3, rel("", "solo", 3, helmrelease.StatusFailed))
		// Labelled and named as release "other", its payload claims web v5.
		forge(t, cl, "team-a", release.SecretName("other", 1), "other", 1, rel("team-a", "web", 5, helmrelease.StatusFailed))
		store := &release.Store{Client: cl.Typed(), Metadata: cl.Metadata()}
		s := &Service{Secrets: store}
		if withIndex {
			s.Index = store
		}
		got := map[string]int{}
		for _, r := range limitedRows(t, s, nil, "") {
			got[r.Namespace+"/"+r.Name] = r.Version
		}
		want := map[string]int{"team-a/web": 2, "team-a/solo": 1, "team-b/solo": 3}
		if asJSON(t, got) != asJSON(t, want) {
			t.Errorf("index %v: rows %v, want %v", withIndex, got, want)
		}
	}
}
