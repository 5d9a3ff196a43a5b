package reader

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// authz lets users read the namespaces listed for them, and counts reviews.
type authz struct {
	may     map[string]map[string]bool
	reviews int
	err     error

	mu                sync.Mutex
	inFlight, maxSeen int
	delay             time.Duration // each review takes this long
}

func (a *authz) Allowed(_ context.Context, u *auth.User, n auth.Need) (bool, error) {
	a.mu.Lock()
	a.reviews++
	a.inFlight++
	a.maxSeen = max(a.maxSeen, a.inFlight)
	a.mu.Unlock()
	defer func() { a.mu.Lock(); a.inFlight--; a.mu.Unlock() }()
	time.Sleep(a.delay)
	if n.Verb != "list" || n.Resource != "secrets" {
		return false, nil
	}
	return a.may[u.Name][n.Namespace], a.err
}

func (a *authz) Check(ctx context.Context, u *auth.User, needs ...auth.Need) error {
	for _, n := range needs {
		ok, err := a.Allowed(ctx, u, n)
		if err != nil {
			return err
		}
		if !ok {
			return auth.ErrForbidden
		}
	}
	return nil
}

func newService(t *testing.T) (*Service, *authz) {
	t.Helper()
	f, err := helmexec.NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	mem := storage.NewMemory()
	idx := metaIndex{}
	at := helmtime.Time{Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	for _, r := range []struct {
		ns, name string
		rev      int
		status   helmrelease.Status
	}{
		{"team-a", "web", 1, helmrelease.StatusSuperseded},
		{"team-a", "web", 2, helmrelease.StatusDeployed},
		{"team-a", "db", 1, helmrelease.StatusPendingInstall},
		{"team-b", "api", 1, helmrelease.StatusFailed},
	} {
		mem.SetNamespace(r.ns)
		rel := &helmrelease.Release{Name: r.name, Namespace: r.ns, Version: r.rev, Manifest: "kind: ConfigMap\n",
			Config: map[string]any{"v": 1},
			Chart:  &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"}},
			Info:   &helmrelease.Info{Status: r.status, FirstDeployed: at, LastDeployed: at, Description: "d"}}
		if err := mem.Create(release.SecretName(r.name, r.rev), rel); err != nil {
			t.Fatal(err)
		}
		idx = append(idx, meta(r.ns, r.name, r.rev))
	}
	mem.SetNamespace("")
	a := &authz{may: map[string]map[string]bool{"alice": {"team-a": true}}}
	return &Service{Helm: f, Authorizer: a, Index: idx, Options: []helmexec.Option{helmexec.WithDriver(mem),
		helmexec.WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard})}}, a
}

// metaIndex answers the metadata of fixed records, as the release index would.
type metaIndex []*metav1.PartialObjectMetadata

func (m metaIndex) ReleaseMetas(_ context.Context, ns string) ([]*metav1.PartialObjectMetadata, error) {
	var out []*metav1.PartialObjectMetadata
	for _, x := range m {
		if ns == "" || x.Namespace == ns {
			out = append(out, x)
		}
	}
	return out, nil
}

func meta(ns, name string, rev int) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release.SecretName(name, rev),
		UID: types.UID(ns + "/" + release.SecretName(name, rev)), ResourceVersion: "1",
		Labels: map[string]string{release.LabelName: name, release.LabelVersion: strconv.Itoa(rev)}}}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// golden compares v, as submit answers it (JSON), with testdata/<name>.json.
func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".json")
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(append(got, '\n')) != string(want) {
		t.Errorf("%s differs (go test -update to rewrite):\n%s", path, got)
	}
}

func TestList(t *testing.T) {
	alice, bob := &auth.User{Name: "alice"}, &auth.User{Name: "bob"}
	for _, tc := range []struct {
		name      string
		user      *auth.User
		ns        string
		limitInfo bool
		golden    string
		err       error
	}{
		{"one namespace", alice, "team-a", false, "list-team-a", nil},
		{"one namespace, limitInfo", alice, "team-a", true, "list-team-a-limited", nil},
		{"all namespaces, only the readable", alice, "", true, "list-all-alice", nil},
		{"all namespaces, authentication off", nil, "", true, "list-all", nil},
		{"a namespace the user may not read", bob, "team-a", false, "", auth.ErrForbidden},
		{"all namespaces, none readable", bob, "", true, "list-none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newService(t)
			out, err := s.List(ctx(t), tc.user, tc.ns, tc.limitInfo)
			if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
				t.Fatalf("List: %v, want %v", err, tc.err)
			}
			if tc.golden != "" {
				golden(t, tc.golden, out)
			}
		})
	}
}

// The all-namespaces list asks once per namespace, not once per release.
func TestListAsksOncePerNamespace(t *testing.T) {
	s, a := newService(t)
	if _, err := s.List(ctx(t), &auth.User{Name: "alice"}, "", false); err != nil {
		t.Fatal(err)
	}
	if a.reviews != 3 {
		t.Errorf("%d reviews for 2 namespaces, want one cluster-wide and one each", a.reviews)
	}
	a.err = errors.New("review failed")
	if _, err := s.List(ctx(t), &auth.User{Name: "alice"}, "", false); err == nil {
		t.Error("a failed review let the list through")
	}
}

func TestLatestAndHistory(t *testing.T) {
	s, _ := newService(t)
	alice := &auth.User{Name: "alice"}
	latest, err := s.Latest(ctx(t), alice, "team-a", "web")
	if err != nil || latest.Version != 2 || latest.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("Latest = %v, %v", latest, err)
	}
	hist, err := s.History(ctx(t), alice, "team-a", "web")
	if err != nil || len(hist) != 2 {
		t.Fatalf("History = %d, %v", len(hist), err)
	}
	golden(t, "history-web", hist)
	if _, err := s.Latest(ctx(t), alice, "team-a", "none"); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("Latest of nothing: %v", err)
	}
	if _, err := s.History(ctx(t), &auth.User{Name: "bob"}, "team-a", "web"); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("History for bob: %v", err)
	}
	if _, err := s.Latest(ctx(t), &auth.User{Name: "bob"}, "team-a", "web"); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("Latest for bob: %v", err)
	}
}

// brokenHelm fails every read.
type brokenHelm struct{ Helm }

func (brokenHelm) List(context.Context, string, ...helmexec.Option) ([]*helmrelease.Release, error) {
	return nil, errors.New("storage down")
}

func TestReadErrorsAndNoAuthorizer(t *testing.T) {
	s, _ := newService(t)
	s.Authorizer = nil // authentication off: every namespace readable
	out, err := s.List(ctx(t), &auth.User{Name: "bob"}, "team-b", false)
	if err != nil || len(out.([]api.Release)) != 1 {
		t.Errorf("List without authorizer = %v, %v", out, err)
	}
	if _, err := s.History(ctx(t), &auth.User{Name: "bob"}, "team-a", "web"); err != nil {
		t.Errorf("History without authorizer: %v", err)
	}
	broken := &Service{Helm: brokenHelm{}}
	if _, err := broken.List(ctx(t), nil, "", true); err == nil || err.Error() != "storage down" {
		t.Errorf("List with broken storage: %v", err)
	}
}

// progress answers for pending revisions, and records what it was asked.
type progressOf struct{ asked []string }

func (p *progressOf) Progress(_ context.Context, ns, secret string) (*progress.Progress, error) {
	p.asked = append(p.asked, ns+"/"+secret)
	return &progress.Progress{Phase: "waiting", Ready: 1, Total: 3}, nil
}

// get and list carry a pending revision's progress; final revisions are not looked up.
func TestProgress(t *testing.T) {
	s, _ := newService(t)
	p := &progressOf{}
	s.Progress = p
	out, err := s.List(ctx(t), nil, "team-a", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range out.([]api.Release) {
		if (r.Progress != nil) != (r.Name == "db") {
			t.Errorf("%s: progress %+v", r.Name, r.Progress)
		}
	}
	if len(p.asked) != 1 || p.asked[0] != "team-a/"+release.SecretName("db", 1) {
		t.Errorf("asked %v", p.asked)
	}
	db, err := s.Latest(ctx(t), nil, "team-a", "db")
	if err != nil || db.Progress == nil || db.Progress.Total != 3 {
		t.Errorf("Latest = %+v, %v", db.Progress, err)
	}
	raw, _ := json.Marshal(db)
	if !strings.Contains(string(raw), `"progress":{"phase":"waiting"`) || !strings.Contains(string(raw), `"name":"db"`) {
		t.Errorf("JSON %s", raw)
	}
	// limitInfo stays Helm's shape.
	if _, err := s.List(ctx(t), nil, "team-a", true); err != nil || len(p.asked) != 2 {
		t.Errorf("limitInfo looked up progress: %v, %v", p.asked, err)
	}
}
