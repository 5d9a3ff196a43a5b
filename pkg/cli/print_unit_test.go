package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
)

// The printers on their own, golden files under testdata/print-*: the shapes helm users
// parse (helm list/history -o json field names), and releases with parts missing (a
// reservation has no manifest; a record from elsewhere may lack chart or info).
func TestPrinters(t *testing.T) {
	at := helmtime.Time{Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("CET", 3600))}
	full := &helmrelease.Release{Name: "web", Namespace: "team", Version: 3,
		Info:  &helmrelease.Info{Status: helmrelease.StatusFailed, LastDeployed: at, Description: "timed out after 5m"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", AppVersion: "1.0"}}}
	bare := &helmrelease.Release{Name: "odd", Namespace: "team", Version: 1}
	pending := &helmrelease.Release{Name: "db", Namespace: "team", Version: 1, Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v3", Namespace: "team", UID: "0d6c",
		Labels: map[string]string{"name": "web", "version": "3", "status": "pending-upgrade"}}}
	for _, format := range []string{"table", "json", "yaml"} {
		for _, tc := range []struct {
			name  string
			print func(w *bytes.Buffer) error
		}{
			{"accepted", func(w *bytes.Buffer) error { return printAccepted(w, format, sec) }},
			{"list", func(w *bytes.Buffer) error { return printList(w, format, []*helmrelease.Release{full, pending, bare}) }},
			{"list-empty", func(w *bytes.Buffer) error { return printList(w, format, nil) }},
			{"history", func(w *bytes.Buffer) error {
				return writeFormat(w, format, newHistory([]*helmrelease.Release{full, bare}, 256))
			}},
			{"status", func(w *bytes.Buffer) error { return printStatus(w, format, full, nil) }},
			{"status-bare", func(w *bytes.Buffer) error { return printStatus(w, format, bare, nil) }},
		} {
			t.Run(tc.name+"."+format, func(t *testing.T) {
				var b bytes.Buffer
				if err := tc.print(&b); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join("testdata", "print-"+tc.name+"."+format)
				if *update {
					if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if b.String() != string(want) {
					t.Errorf("%s differs (go test -update to rewrite):\n%s", path, b.String())
				}
			})
		}
	}
}

// printList prints Helm releases as the list route's latest revisions.
func printList(w io.Writer, format string, rels []*helmrelease.Release) error {
	all := make([]api.Release, 0, len(rels))
	for _, r := range rels {
		all = append(all, api.Release{Release: r})
	}
	return writeFormat(w, format, newReleaseList(all, listPrint{}))
}

// printStatus is status of r with progress p.
func printStatus(w io.Writer, format string, r *helmrelease.Release, p *progress.Progress) error {
	return writeFormat(w, format, newStatusPrinter(api.Release{Release: r, Progress: p}, statusShow{Description: true}))
}
