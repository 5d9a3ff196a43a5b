package valuesfrom

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    Ref
	}{
		{in: "secret/db", want: Ref{Kind: KindSecret, Name: "db"}},
		{in: "secret/db:pw.yaml", want: Ref{Kind: KindSecret, Name: "db", Key: "pw.yaml"}},
		{in: "configmap/app:values.yaml", want: Ref{Kind: KindConfigMap, Name: "app", Key: "values.yaml"}},
		{in: "ConfigMap/app", want: Ref{Kind: KindConfigMap, Name: "app"}},
		{in: "cm/app", want: Ref{Kind: KindConfigMap, Name: "app"}},
		{in: "pod/x", err: `invalid values_from: "pod/x": want secret/NAME[:key] or configmap/NAME[:key]`},
		{in: "secret", err: `invalid values_from: "secret": want secret/NAME[:key] or configmap/NAME[:key]`},
		{in: "secret/Bad_Name", err: `invalid values_from: Secret name "Bad_Name": a lowercase RFC 1123 subdomain`},
		{in: "secret/db:a/b", err: `invalid values_from: Secret db key "a/b": a valid config key must consist of`},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Parse(%q) = %v, want %q...", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// A reference names an object of the release's namespace only; a flood is refused before
// anything is read.
func TestValidate(t *testing.T) {
	flood := make([]Ref, MaxRefs+1)
	for i := range flood {
		flood[i] = Ref{Kind: KindConfigMap, Name: fmt.Sprintf("cm%d", i)}
	}
	for _, tc := range []struct {
		name string
		refs []Ref
		want string
	}{
		{"none", nil, ""},
		{"at the bound", flood[:MaxRefs], ""},
		{"own namespace named", []Ref{{Kind: KindSecret, Name: "db", Namespace: "team"}}, ""},
		{"a flood", flood, "invalid values_from: 17 references, at most 16"},
		{"another namespace", []Ref{{Kind: KindSecret, Name: "db", Namespace: "kube-system"}},
			"invalid values_from: Secret kube-system/db: a reference reads the release's namespace team only"},
		{"kind", []Ref{{Kind: "secret", Name: "db"}}, `invalid values_from: kind "secret": want Secret or ConfigMap`},
		{"no name", []Ref{{Kind: KindSecret}}, `invalid values_from: Secret name "": a lowercase RFC 1123 subdomain`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.refs, "team")
			got := ""
			if err != nil {
				got = err.Error()
			}
			if !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
				t.Errorf("Validate = %q, want %q", got, tc.want)
			}
		})
	}
}

// objects is a Reader over a map "Kind/name" -> data that counts its reads.
type objects struct {
	data  map[string]map[string][]byte
	reads int
}

func (o *objects) Data(_ context.Context, kind, namespace, name string) (map[string][]byte, bool, error) {
	o.reads++
	if namespace != "team" {
		return nil, false, fmt.Errorf("read in namespace %s", namespace)
	}
	d, ok := o.data[kind+"/"+name]
	return d, ok, nil
}

func TestLoad(t *testing.T) {
	big := "a: " + strings.Repeat("x", MaxKeyBytes) + "\n"
	half := "a: " + strings.Repeat("x", MaxKeyBytes-100) + "\n"
	bomb := "a: &a [" + strings.Repeat("x,", 1000) + "x]\nb: &b [" + strings.Repeat("*a,", 100) + "*a]\nc: [" + strings.Repeat("*b,", 100) + "*b]\n"
	store := &objects{data: map[string]map[string][]byte{
		"Secret/db":        {"values.yaml": []byte("db:\n  password: s3cret\n  port: 5432\n")},
		"ConfigMap/app":    {"values.yaml": []byte("db:\n  port: 5433\n  host: db\nreplicas: 2\n"), "other": []byte("replicas: 3\n")},
		"ConfigMap/list":   {"values.yaml": []byte("- a\n- b\n")},
		"ConfigMap/broken": {"values.yaml": []byte("a: [\n")},
		"ConfigMap/empty":  {"values.yaml": []byte("")},
		"ConfigMap/huge":   {"values.yaml": []byte(big)},
		"ConfigMap/half1":  {"values.yaml": []byte(half)},
		"ConfigMap/half2":  {"values.yaml": []byte(half)},
		"ConfigMap/half3":  {"values.yaml": []byte(half)},
		"ConfigMap/bomb":   {"values.yaml": []byte(bomb)},
	}}
	secret, app := Ref{Kind: KindSecret, Name: "db"}, Ref{Kind: KindConfigMap, Name: "app"}
	for _, tc := range []struct {
		name string
		refs []Ref
		want map[string]any
		err  string
	}{
		{"in order, later wins, maps merged", []Ref{secret, app},
			map[string]any{"db": map[string]any{"password": "s3cret", "port": float64(5433), "host": "db"}, "replicas": float64(2)}, ""},
		{"other order", []Ref{app, secret},
			map[string]any{"db": map[string]any{"password": "s3cret", "port": float64(5432), "host": "db"}, "replicas": float64(2)}, ""},
		{"a named key", []Ref{{Kind: KindConfigMap, Name: "app", Key: "other"}}, map[string]any{"replicas": float64(3)}, ""},
		{"an empty key", []Ref{{Kind: KindConfigMap, Name: "empty"}}, map[string]any{}, ""},
		{"missing object", []Ref{{Kind: KindSecret, Name: "nope"}}, nil, "invalid values_from: Secret team/nope not found"},
		{"missing key", []Ref{{Kind: KindSecret, Name: "db", Key: "pw"}}, nil, `invalid values_from: Secret team/db has no key "pw"`},
		{"not a map", []Ref{{Kind: KindConfigMap, Name: "list"}}, nil, `invalid values_from: ConfigMap team/list key "values.yaml" is not a YAML map of values`},
		{"not YAML", []Ref{{Kind: KindConfigMap, Name: "broken"}}, nil, `invalid values_from: ConfigMap team/broken key "values.yaml" is not a YAML map of values`},
		{"a huge ConfigMap", []Ref{{Kind: KindConfigMap, Name: "huge"}}, nil,
			fmt.Sprintf(`invalid values_from: ConfigMap team/huge key "values.yaml": %d bytes, at most %d`, len(big), MaxKeyBytes)},
		{"past the total", []Ref{{Kind: KindConfigMap, Name: "half1"}, {Kind: KindConfigMap, Name: "half2"}, {Kind: KindConfigMap, Name: "half3"}}, nil,
			`invalid values_from: ConfigMap team/half3 key "values.yaml" (values_from reads at most 1048576 bytes and 100000 YAML nodes in all)`},
		{"an alias bomb", []Ref{{Kind: KindConfigMap, Name: "bomb"}}, nil,
			`invalid values_from: ConfigMap team/bomb key "values.yaml" (values_from reads at most 1048576 bytes and 100000 YAML nodes in all)`},
		{"another namespace", []Ref{{Kind: KindSecret, Name: "db", Namespace: "other"}}, nil,
			"invalid values_from: Secret other/db: a reference reads the release's namespace team only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Load(context.Background(), store, "team", tc.refs)
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("Load = %v, want %q...", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Load = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// A flood is refused before the first read.
func TestFloodReadsNothing(t *testing.T) {
	store := &objects{}
	refs := make([]Ref, 1000)
	for i := range refs {
		refs[i] = Ref{Kind: KindSecret, Name: "db"}
	}
	if _, err := Load(context.Background(), store, "team", refs); !errors.Is(err, ErrInvalid) || store.reads != 0 {
		t.Fatalf("Load of 1000 references: %v after %d reads, want ErrInvalid before any", err, store.reads)
	}
}

// Inline values go over the references' and are not changed.
func TestValuesInlineWin(t *testing.T) {
	store := &objects{data: map[string]map[string][]byte{"Secret/db": {"values.yaml": []byte("db: {password: s3cret, user: app}\n")}}}
	inline := map[string]any{"db": map[string]any{"user": "admin"}}
	got, err := Values(context.Background(), store, "team", []Ref{{Kind: KindSecret, Name: "db"}}, inline)
	want := map[string]any{"db": map[string]any{"password": "s3cret", "user": "admin"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Values = %v, %v; want %v", got, err, want)
	}
	if !reflect.DeepEqual(inline, map[string]any{"db": map[string]any{"user": "admin"}}) {
		t.Fatalf("inline values changed: %v", inline)
	}
}

// KubeReader: a missing object is not found, a refused read is ErrForbidden, a ConfigMap's
// binaryData is read too.
func TestKubeReader(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "app"},
			Data: map[string]string{"values.yaml": "a: 1"}, BinaryData: map[string][]byte{"bin.yaml": []byte("b: 2")}},
	)
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, forbidden()
	})
	r := KubeReader{Client: cs}
	ctx := context.Background()
	d, found, err := r.Data(ctx, KindConfigMap, "team", "app")
	if err != nil || !found || string(d["values.yaml"]) != "a: 1" || string(d["bin.yaml"]) != "b: 2" {
		t.Fatalf("ConfigMap: %v %v %v", d, found, err)
	}
	if _, found, err := r.Data(ctx, KindConfigMap, "team", "nope"); err != nil || found {
		t.Fatalf("missing ConfigMap: found %v, %v", found, err)
	}
	if _, _, err := r.Data(ctx, KindSecret, "team", "db"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("refused Secret: %v, want ErrForbidden", err)
	}
}

func forbidden() error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db", errors.New("no"))
}
