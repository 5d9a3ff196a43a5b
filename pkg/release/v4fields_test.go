package release

import (
	"encoding/json"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A running Helm v4 action's record (apply_method, info.rollback_revision) failed by the
// executor or the sweeper keeps both: Helm v4's `auto` apply of the next upgrade reads it.
func TestMarkFailedKeepsHelmV4Fields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields string // added to the payload's JSON
		want   V4Fields
	}{
		{"server-side", `"apply_method":"ssa"`, V4Fields{ApplyMethod: "ssa"}},
		{"a v3 record", ``, V4Fields{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, _ := newStore(t)
			reserve(t, s, "web", ActionInstall, "r")
			secrets := c.CoreV1().Secrets("ns")
			sec, err := secrets.Get(ctx(t), SecretName("web", 1), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rel, err := DecodeRelease(sec.Data["release"])
			if err != nil {
				t.Fatal(err)
			}
			// Helm adopted it: the whole chart, status pending-install.
			rel.Chart.Templates = []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}
			rel.Info.Status = helmrelease.StatusPendingInstall
			raw, _ := json.Marshal(rel)
			if tc.fields != "" {
				raw = append(append(raw[:len(raw)-1], ','), tc.fields+"}"...)
			}
			if sec.Data["release"], err = encodePayload(raw); err != nil {
				t.Fatal(err)
			}
			if _, err := secrets.Update(ctx(t), sec, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if changed, err := s.MarkFailed(ctx(t), "ns", "web", 1, "cancelled by alice", KeepFailed); !changed || err != nil {
				t.Fatalf("MarkFailed = %v, %v", changed, err)
			}
			sec, err = secrets.Get(ctx(t), SecretName("web", 1), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				V4Fields
				Info struct {
					Status      string `json:"status"`
					Description string `json:"description"`
				} `json:"info"`
			}
			if err := DecodeInto(sec.Data["release"], &got); err != nil {
				t.Fatal(err)
			}
			if got.ApplyMethod != tc.want.ApplyMethod || got.Info.Status != "failed" || got.Info.Description != "cancelled by alice" {
				t.Errorf("failed record: apply_method %q, status %s %q; want %q", got.ApplyMethod, got.Info.Status, got.Info.Description, tc.want.ApplyMethod)
			}
		})
	}
}

// WithV4Fields writes info.rollback_revision into info beside what is there.
func TestWithV4FieldsKeepsRollbackRevision(t *testing.T) {
	payload, err := encodePayload([]byte(`{"name":"web","info":{"status":"failed"}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := V4Fields{ApplyMethod: "csa"}
	f.Info.RollbackRevision = 3
	out, err := WithV4Fields(payload, f)
	if err != nil {
		t.Fatal(err)
	}
	var got V4Fields
	var info struct {
		Info struct {
			Status string `json:"status"`
		} `json:"info"`
	}
	if DecodeInto(out, &got) != nil || DecodeInto(out, &info) != nil || got != f || info.Info.Status != "failed" {
		t.Errorf("fields %+v, status %q", got, info.Info.Status)
	}
}
