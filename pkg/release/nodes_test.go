package release

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// jsonNodes is the decode's count of raw's JSON values, as an int.
func jsonNodes(raw []byte, limit int) int { return int(yamlsize.JSONNodes(raw, int64(limit))) }

// flatRecord is a valid record of name whose config is a list of items `{}`: one map
// decoded for every three bytes of JSON.
func flatRecord(name string, items int) []byte {
	return []byte(`{"name":"` + name + `","namespace":"ns","version":1,"info":{"status":"deployed"},` +
		`"chart":{"metadata":{"name":"tiny","version":"1.0.0","apiVersion":"v2"}},"config":{"a":[` +
		strings.Repeat("{},", items) + `{}]}}`)
}

// A record's bound in bytes is not a bound in memory: Helm decodes config and chart values
// into maps, and a flat list of {} under MaxRecordBytes decoded to ~70 times its gzip. Four
// such Secrets of a namespace (21 KiB each), one List: the guarded decode refuses each
// record over MaxRecordNodes before decoding it, and lists the namespace's other records.
func TestOneListHoldsHandMadeRecordsWithinItsNodes(t *testing.T) {
	_, c, _ := newStore(t)
	const records = 4
	items := (MaxRecordBytes - 4096) / 3
	for i := range records {
		name := fmt.Sprintf("web%d", i)
		body := flatRecord(name, items)
		payload := gzipped(t, body)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName(name, 1), Namespace: "ns",
			Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: name, LabelStatus: "deployed", LabelVersion: "1"}},
			Type: SecretType, Data: map[string][]byte{"release": payload}}
		if _, err := c.CoreV1().Secrets("ns").Create(ctx(t), sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			t.Logf("each Secret's payload: %d KiB (gzip of %d MiB of JSON)", len(payload)>>10, len(body)>>20)
		}
	}
	ok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName("ok", 1), Namespace: "ns",
		Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: "ok", LabelStatus: "deployed", LabelVersion: "1"}},
		Type: SecretType, Data: map[string][]byte{"release": gzipped(t, flatRecord("ok", 10))}}
	if _, err := c.CoreV1().Secrets("ns").Create(ctx(t), ok, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := GuardedSecrets(c.CoreV1().Secrets("ns"))
	var logged []string
	d.Log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	rels, err := d.List(func(*helmrelease.Release) bool { return true })
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	held := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc)
	t.Logf("one List: %d records, err %v; allocated %d MiB, %d MiB still held by the result",
		len(rels), err, (ms1.TotalAlloc-ms0.TotalAlloc)>>20, held>>20)
	runtime.KeepAlive(rels)
	if err != nil || len(rels) != 1 || rels[0].Name != "ok" {
		t.Fatalf("List kept %d records (%v), want only the other release's, the 4 hand-made ones skipped", len(rels), err)
	}
	if held > MaxReadBytes {
		t.Errorf("one List of %d hand-made records holds %d MiB decoded (MaxReadBytes %d MiB)", records, held>>20, MaxReadBytes>>20)
	}
	if len(logged) != records || !strings.Contains(logged[0], "JSON values") {
		t.Errorf("logged %q, want each record skipped for its JSON values", logged)
	}
}

// The node bound refuses a record just over it as undecodable (too large), keeps one at
// it, and counts no structural byte inside a string.
func TestDecodeBoundsARecordsNodes(t *testing.T) {
	base := jsonNodes(flatRecord("web", 0), MaxRecordNodes)
	at := flatRecord("web", (MaxRecordNodes-base)/2)
	if n := jsonNodes(at, MaxRecordNodes); n > MaxRecordNodes {
		t.Fatalf("a record at the bound counts %d nodes", n)
	}
	payload := gzipped(t, at)
	runtime.GC()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	rls, err := DecodeRelease(payload)
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	if err != nil {
		t.Errorf("a record at the node bound: %v", err)
	}
	t.Logf("a record at the node bound (%d KiB of JSON) holds %d MiB decoded", len(at)>>10, (int64(ms1.HeapAlloc)-int64(ms0.HeapAlloc))>>20)
	runtime.KeepAlive(rls)
	over := flatRecord("web", (MaxRecordNodes-base)/2+1)
	_, err = DecodeRelease(gzipped(t, over))
	if !isErr(err, ErrUndecodable) || !isErr(err, errTooLarge) {
		t.Errorf("a record over the node bound: got %v, want ErrUndecodable (too large)", err)
	}
	var h Head
	if err := DecodeInto(gzipped(t, over), &h); !isErr(err, ErrUndecodable) {
		t.Errorf("a head of a record over the node bound: got %v, want ErrUndecodable", err)
	}
	str := []byte(`{"name":"` + strings.Repeat(`{[,:\"\\`, 1000) + `"}`)
	if n := jsonNodes(str, MaxRecordNodes); n != 3 { // the document, its key, its value
		t.Errorf("structural bytes in a string counted: %d nodes, want 3", n)
	}
}

// One read keeps records up to a node budget as well as a byte budget: records of few
// bytes and many nodes add up to the read's nodes, the rest are skipped with one line.
func TestOneReadKeepsRecordsUpToItsNodes(t *testing.T) {
	var payloads [][]byte
	nodes := 0
	for v := 1; v <= 5; v++ {
		js := fmt.Sprintf(`{"name":"web","namespace":"ns","version":%d,"info":{"status":"superseded"},`+
			`"chart":{"metadata":{"name":"tiny","version":"1.0.0"}},"config":{"a":[%s0]}}`, v, strings.Repeat("0,", 1000))
		nodes = jsonNodes([]byte(js), MaxRecordNodes)
		payloads = append(payloads, gzipped(t, []byte(js)))
	}
	d := GuardedSecrets(records{payloads: payloads})
	var logged []string
	d.Log = func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	rels, err := d.readWithin(SelectorReleaseSecrets, &ReadBudget{bound: readBudget{bytes: MaxReadBytes, nodes: 3*nodes + nodes/2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) != 3 || rels[2].Version != 3 {
		t.Fatalf("kept %d records, want the first 3", len(rels))
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "skipping 2 release records") {
		t.Errorf("logged %q, want one line for the 2 records skipped", logged)
	}
	if MaxReadNodes != 4*MaxRecordNodes {
		t.Errorf("MaxReadNodes %d, MaxRecordNodes %d", MaxReadNodes, MaxRecordNodes)
	}
}

// MaxRecordNodes is sized from Helm's own records: GitLab 6.5.4's (the largest chart the
// tests install) with the offline values, counted as the guarded decode counts it.
func TestGitLabRecordIsWellWithinTheNodeBound(t *testing.T) {
	ch, err := loader.Load("../../testdata/charts/gitlab-6.5.4.tgz")
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ReadValuesFile("../../testdata/charts/gitlab-values-offline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rls := &helmrelease.Release{Name: "gitlab", Namespace: "ns", Version: 1, Chart: ch, Config: vals,
		Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}, Manifest: strings.Repeat("a: b\n", 1<<18)}
	js, err := json.Marshal(rls)
	if err != nil {
		t.Fatal(err)
	}
	n := jsonNodes(js, MaxRecordNodes+1)
	payload, err := EncodeRelease(rls)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(string(payload))
	t.Logf("GitLab 6.5.4's record: %d KiB of JSON, %d KiB stored, %d nodes (MaxRecordNodes %d)", len(js)>>10, len(raw)>>10, n, MaxRecordNodes)
	if 10*n > MaxRecordNodes {
		t.Errorf("GitLab's record counts %d nodes: less than 10x room under MaxRecordNodes %d", n, MaxRecordNodes)
	}
	if _, err := DecodeRelease(payload); err != nil {
		t.Errorf("GitLab's record: %v", err)
	}
}
