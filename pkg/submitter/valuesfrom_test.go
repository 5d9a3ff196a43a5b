package submitter

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// valueObjects is a valuesfrom.Reader over "Kind/name" of namespace ns, counting reads.
type valueObjects struct {
	data  map[string]string
	reads []string
}

func (v *valueObjects) Data(_ context.Context, kind, namespace, name string) (map[string][]byte, bool, error) {
	v.reads = append(v.reads, kind+" "+namespace+"/"+name)
	d, ok := v.data[kind+"/"+name]
	if !ok || namespace != "ns" {
		return nil, false, nil
	}
	return map[string][]byte{"values.yaml": []byte(d)}, true, nil
}

func valuesFromEnv(t *testing.T) (*env, *valueObjects, *authz) {
	e := newEnv(t)
	objs := &valueObjects{data: map[string]string{
		"Secret/db":     "password: s3cret\nreplicas: 3\n",
		"ConfigMap/bad": "replicas: many\n",
	}}
	az := &authz{allow: map[auth.Need]bool{
		{Verb: "create", Resource: "secrets", Namespace: "ns"}:              true,
		{Verb: "update", Resource: "secrets", Namespace: "ns"}:              true,
		{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "db"}:     true,
		{Verb: "get", Resource: "configmaps", Namespace: "ns", Name: "bad"}: true,
	}}
	e.svc.ValuesObjects, e.svc.Authorizer = objs, az
	return e, objs, az
}

var alice = &auth.User{Name: "alice", UID: "u1"}

// The event and the reservation carry the reference, never the values it names; submit's
// schema check sees the merged values.
func TestValuesFromTravelsAsAReference(t *testing.T) {
	e, objs, _ := valuesFromEnv(t)
	req := install("web")
	req.Values = map[string]any{"image": "web:1"}
	req.ValuesFrom = []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db"}}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, req, alice); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(objs.reads, []string{"Secret ns/db"}) {
		t.Errorf("reads %v", objs.reads)
	}
	raw, _ := e.sender.sent[0].MarshalJSON()
	a, err := events.ParseAccepted(e.sender.sent[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "s3cret") || a.Values["password"] != nil {
		t.Errorf("the event carries the Secret's values: %s", raw)
	}
	if !reflect.DeepEqual(a.ValuesFrom, req.ValuesFrom) || a.Options.ReuseValues {
		t.Errorf("event values_from %+v reuse %v", a.ValuesFrom, a.Options.ReuseValues)
	}
	for _, sec := range e.secrets() {
		for k, v := range sec.Data {
			if strings.Contains(string(v), "s3cret") {
				t.Errorf("reservation key %s holds the password", k)
			}
		}
	}
	rel, err := e.store.Get(ctx(t), "ns", "web", 1)
	if err != nil || rel.Config["password"] != nil {
		t.Errorf("reserved config %v, %v", rel.Config, err)
	}
}

func TestValuesFromRefusals(t *testing.T) {
	secret := valuesfrom.Ref{Kind: valuesfrom.KindSecret, Name: "db"}
	for _, tc := range []struct {
		name  string
		refs  []valuesfrom.Ref
		err   error
		reads int
	}{
		{"no get on the Secret", []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "other"}}, auth.ErrForbidden, 0},
		{"no get on the second", []valuesfrom.Ref{secret, {Kind: valuesfrom.KindConfigMap, Name: "db"}}, auth.ErrForbidden, 0},
		{"another namespace", []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db", Namespace: "kube-system"}}, ErrInvalid, 0},
		{"missing object", []valuesfrom.Ref{{Kind: valuesfrom.KindConfigMap, Name: "gone"}}, ErrInvalid, 1},
		{"merged values against the schema", []valuesfrom.Ref{{Kind: valuesfrom.KindConfigMap, Name: "bad"}}, ErrValues, 1},
		{"a flood", make([]valuesfrom.Ref, valuesfrom.MaxRefs+1), ErrInvalid, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, objs, az := valuesFromEnv(t)
			az.allow[auth.Need{Verb: "get", Resource: "configmaps", Namespace: "ns", Name: "gone"}] = true
			req := install("web")
			req.ValuesFrom, req.Values = tc.refs, nil
			_, err := e.svc.Submit(ctx(t), release.ActionInstall, req, alice)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Submit: %v, want %v", err, tc.err)
			}
			if len(objs.reads) != tc.reads || len(e.secrets()) != 0 || len(e.sender.sent) != 0 {
				t.Errorf("refused, yet %d reads (want %d), %d reservations, %d events", len(objs.reads), tc.reads, len(e.secrets()), len(e.sender.sent))
			}
		})
	}
}

// deployWithRefs writes a deployed revision whose chart recorded refs.
func (e *env) deployWithRefs(name string, v int, config map[string]any, refs []valuesfrom.Ref) {
	e.t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}}
	if err := release.RecordValuesFrom(ch, refs); err != nil {
		e.t.Fatal(err)
	}
	rel := &helmrelease.Release{Name: name, Namespace: "ns", Version: v, Chart: ch, Config: config, Manifest: "kind: ConfigMap",
		Info: &helmrelease.Info{Status: helmrelease.StatusDeployed, Description: "Install complete"}}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName(name, v), rel); err != nil {
		e.t.Fatal(err)
	}
}

// An upgrade reusing values (or naming none) takes the references its base recorded, read
// again as the caller; one naming its own takes those.
func TestUpgradeReusesRecordedReferences(t *testing.T) {
	recorded := []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db", Key: "values.yaml"}}
	own := []valuesfrom.Ref{{Kind: valuesfrom.KindConfigMap, Name: "bad"}}
	for _, tc := range []struct {
		name      string
		req       func(r *api.ReleaseRequest)
		wantRefs  []valuesfrom.Ref
		wantReuse bool
		err       error
	}{
		{"--reuse-values", func(r *api.ReleaseRequest) { r.ReuseValues, r.Values = true, map[string]any{"image": "web:2"} }, recorded, true, nil},
		{"no values at all", func(r *api.ReleaseRequest) { r.Values = nil }, recorded, true, nil},
		{"new values only", func(r *api.ReleaseRequest) { r.Values = map[string]any{"image": "web:2"} }, nil, false, nil},
		{"its own references", func(r *api.ReleaseRequest) { r.ValuesFrom, r.Values = own, nil }, own, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, objs, _ := valuesFromEnv(t)
			e.deployWithRefs("web", 1, map[string]any{"password": "s3cret", "replicas": 3, "image": "web:1"}, recorded)
			req := install("web")
			req.ChartURL = ""
			tc.req(&req)
			_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, req, alice)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Submit: %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			a, err := events.ParseAccepted(e.sender.sent[0])
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a.ValuesFrom, tc.wantRefs) || a.Options.ReuseValues != tc.wantReuse {
				t.Errorf("event values_from %+v reuse %v; want %+v %v", a.ValuesFrom, a.Options.ReuseValues, tc.wantRefs, tc.wantReuse)
			}
			if got := len(objs.reads); got != len(tc.wantRefs) {
				t.Errorf("%d reads, want %d", got, len(tc.wantRefs))
			}
		})
	}
}

// A record naming another namespace's Secret (the tenant can write its records) is refused
// before anything is read.
func TestRecordedReferenceToAnotherNamespaceIsRefused(t *testing.T) {
	e, objs, _ := valuesFromEnv(t)
	e.deployWithRefs("web", 1, map[string]any{"replicas": 1}, []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db"}})
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := release.DecodeRelease(sec.Data["release"])
	if err != nil {
		t.Fatal(err)
	}
	rel.Chart.Metadata.Annotations[release.AnnotationValuesFrom] = `[{"kind":"Secret","name":"token","namespace":"kube-system"}]`
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Update(release.SecretName("web", 1), rel); err != nil {
		t.Fatal(err)
	}
	req := install("web")
	req.ChartURL, req.Values, req.ReuseValues = "", nil, true
	if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, req, alice); !errors.Is(err, ErrInvalid) || len(objs.reads) != 0 {
		t.Fatalf("Submit: %v after %v reads, want ErrInvalid before any", err, objs.reads)
	}
}
