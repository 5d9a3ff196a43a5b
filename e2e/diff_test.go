package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/pkg/diff"
)

// toggleTemplates: a ConfigMap of .Values.message, one ConfigMap per .Values.extras and a
// Secret of .Values.password; an upgrade that changes extras adds and removes objects.
const toggleTemplates = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-config
data:
  message: {{ .Values.message | quote }}
{{- range .Values.extras }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $.Release.Name }}-{{ . }}
data:
  extra: {{ . | quote }}
{{- end }}
---
apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-db
stringData:
  password: {{ .Values.password | quote }}
`

const firstPassword, secondPassword = "first-e2e-diff-pw", "second-e2e-diff-pw"

// serveToggle serves chart "toggle" 0.1.0 on loopback and returns its URL.
func serveToggle(t *testing.T) string {
	t.Helper()
	archive := hostile.Archive(t, hostile.ChartYAML("toggle"),
		hostile.Entry{Name: "toggle/values.yaml", Data: []byte("message: hello\nextras: [old]\npassword: " + firstPassword + "\n")},
		hostile.Entry{Name: "toggle/templates/all.yaml", Data: []byte(toggleTemplates)})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/toggle-0.1.0.tgz"
}

// `oc helm diff upgrade` of an upgrade that adds, changes and removes objects names each as
// helm-diff does, masks the Secret's value, answers the same as JSON, exits 2 with
// --detailed-exitcode, and applies nothing: the release stays at revision 1 and the cluster
// as it was.
func TestOcHelmDiffUpgrade(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStackWith(t, map[string]string{"MAX_QUEUED": "1000000"}, ns)
	chart := serveToggle(t)
	if out, code := s.ocHelm(t, "-n", ns, "install", "web", chart, "--wait"); code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	upgrade := []string{"-n", ns, "diff", "upgrade", "web", chart, "--set", "message=changed", "--set", "extras={new}", "--set", "password=" + secondPassword}
	out, code := s.ocHelm(t, upgrade...)
	if code != 0 {
		t.Fatalf("diff upgrade: exit %d\n%s", code, out)
	}
	t.Logf("oc helm diff upgrade:\n%s", out)
	for _, want := range []string{
		ns + ", web-config, ConfigMap (v1) has changed:\n", `-   message: "hello"`, `+   message: "changed"`,
		ns + ", web-new, ConfigMap (v1) has been added:\n", ns + ", web-old, ConfigMap (v1) has been removed:\n",
		ns + ", web-db, Secret (v1) has changed:\n", "-------- # (17 bytes)", "++++++++ # (18 bytes)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the diff lacks %q", want)
		}
	}
	if strings.Contains(out, firstPassword) || strings.Contains(out, secondPassword) {
		t.Errorf("the diff shows the Secret's value")
	}

	js, code := s.ocHelm(t, append(upgrade, "-o", "json")...)
	var changes []diff.Change // helm-diff's JSON: an array of changes
	if err := json.Unmarshal([]byte(js), &changes); code != 0 || err != nil {
		t.Fatalf("diff -o json: exit %d, %v\n%s", code, err, js)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Change+" "+c.Kind+"/"+c.Name)
	}
	if strings.Join(got, " ") != "MODIFY ConfigMap/web-config MODIFY Secret/web-db ADD ConfigMap/web-new REMOVE ConfigMap/web-old" {
		t.Errorf("diff -o json: %s", strings.Join(got, " "))
	}
	if _, code := s.ocHelm(t, append(upgrade, "--detailed-exitcode")...); code != 2 {
		t.Errorf("--detailed-exitcode with changes: exit %d, want 2", code)
	}
	if out, code := s.ocHelm(t, "-n", ns, "diff", "upgrade", "web", "--detailed-exitcode"); code != 0 || out != "" {
		t.Errorf("diff of an upgrade that changes nothing: exit %d\n%s", code, out)
	}
	assertNothingApplied(t, s, ns)
}

// assertNothingApplied checks that web is still revision 1 with its objects as installed.
func assertNothingApplied(t *testing.T, s *stack, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	revs, err := s.client.History(ctx, ns, "web")
	if err != nil || len(revs) != 1 || revs[0].Version != 1 || revs[0].Info.Status.String() != "deployed" {
		t.Fatalf("after the diffs: history %d revisions, %v", len(revs), err)
	}
	if msg := configMessage(t, ns); msg != "hello" {
		t.Errorf("web-config says %q after the diffs", msg)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-new", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("web-new after the diffs: %v", err)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-old", metav1.GetOptions{}); err != nil {
		t.Errorf("web-old after the diffs: %v", err)
	}
}
