package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/progress"
)

func TestValidate(t *testing.T) {
	ok := func() ReleaseRequest {
		return ReleaseRequest{Name: "web", Namespace: "team-a", ChartURL: "https://charts.example/tiny-1.0.0.tgz"}
	}
	for _, tc := range []struct {
		name      string
		change    func(r *ReleaseRequest)
		needChart bool
		err       string // "" = valid
	}{
		{"install", func(*ReleaseRequest) {}, true, ""},
		{"install by index entry", func(r *ReleaseRequest) { r.ChartURL, r.IndexEntry = "", "tiny--local" }, true, ""},
		{"upgrade without chart", func(r *ReleaseRequest) { r.ChartURL = "" }, false, ""},
		{"install without chart", func(r *ReleaseRequest) { r.ChartURL = "" }, true, "chart_url or indexEntry is required"},
		{"name with capitals", func(r *ReleaseRequest) { r.Name = "Bad_Name" }, true, `release name "Bad_Name"`},
		{"empty name", func(r *ReleaseRequest) { r.Name = "" }, true, "release name"},
		{"name too long", func(r *ReleaseRequest) { r.Name = strings.Repeat("a", 54) }, true, "release name"},
		{"namespace not a DNS label", func(r *ReleaseRequest) { r.Namespace = "Team A" }, true, `namespace "Team A"`},
		{"empty namespace", func(r *ReleaseRequest) { r.Namespace = "" }, true, `namespace ""`},
		{"timeout", func(r *ReleaseRequest) { r.Timeout = "10m" }, true, ""},
		{"timeout not a duration", func(r *ReleaseRequest) { r.Timeout = "soon" }, true, `timeout "soon"`},
		{"negative timeout", func(r *ReleaseRequest) { r.Timeout = "-1m" }, true, `timeout "-1m"`},
		{"zero timeout", func(r *ReleaseRequest) { r.Timeout = "0s" }, true, `timeout "0s"`},
		{"chart URL with a forbidden scheme", func(r *ReleaseRequest) { r.ChartURL = "file:///etc/passwd" }, true, "scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.change(&r)
			err := r.Validate(tc.needChart)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestParsedTimeout(t *testing.T) {
	for in, want := range map[string]time.Duration{"": DefaultTimeout, "90s": 90 * time.Second, "1h": time.Hour} {
		r := ReleaseRequest{Timeout: in}
		if got, err := r.ParsedTimeout(); err != nil || got != want {
			t.Errorf("ParsedTimeout(%q) = %s, %v", in, got, err)
		}
	}
}

func TestChartRef(t *testing.T) {
	r := ReleaseRequest{ChartURL: "oci://registry.example/charts/tiny", ChartVersion: "1.0.0", IndexEntry: ""}
	if c := r.Chart(); c.URL != r.ChartURL || c.Version != "1.0.0" || c.IndexEntry != "" {
		t.Errorf("Chart() = %+v", c)
	}
}

// The console reads these JSON names: they are the contract.
func TestWireNames(t *testing.T) {
	var r ReleaseRequest
	body := `{"name":"web","namespace":"ns","chart_url":"u","chart_version":"1","indexEntry":"e","values":{"a":1},
		"timeout":"1m","wait":true,"wait_for_jobs":true,"atomic":true,"description":"d"}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	want := ReleaseRequest{Name: "web", Namespace: "ns", ChartURL: "u", ChartVersion: "1", IndexEntry: "e",
		Values: map[string]any{"a": float64(1)}, Timeout: "1m", Wait: true, WaitForJobs: true, Atomic: true, Description: "d"}
	if r.Name != want.Name || r.ChartURL != want.ChartURL || r.ChartVersion != want.ChartVersion || r.IndexEntry != want.IndexEntry ||
		r.Values["a"] != want.Values["a"] || r.Timeout != want.Timeout || !r.Wait || !r.WaitForJobs || !r.Atomic || r.Description != "d" {
		t.Errorf("decoded %+v", r)
	}
	raw, _ := json.Marshal(Error{Error: "boom"})
	if string(raw) != `{"error":"boom"}` {
		t.Errorf("error body %s", raw)
	}
}

func TestLimit(t *testing.T) {
	full := &release.Release{Name: "web", Namespace: "ns", Version: 3, Manifest: "secret: stuff", Config: map[string]any{"password": "x"},
		Info:  &release.Info{Status: release.StatusDeployed},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, Templates: []*chart.File{{Name: "t"}}}}
	got := Limit(full)
	if got.Name != "web" || got.Namespace != "ns" || got.Version != 3 || got.Info.Status != release.StatusDeployed || got.Chart.Metadata.Name != "tiny" {
		t.Errorf("Limit = %+v", got)
	}
	raw, _ := json.Marshal(got)
	for _, leak := range []string{"manifest", "password", "templates", "config"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("limitInfo carries %q: %s", leak, raw)
		}
	}
	if bare := Limit(&release.Release{Name: "x"}); bare.Chart.Metadata != nil || bare.Info != nil {
		t.Errorf("Limit of a release without chart: %+v", bare)
	}
}

// get and list answer Helm's release with progress beside it; a client that knows only
// Helm's fields reads the same object.
func TestReleaseWithProgress(t *testing.T) {
	rel := &release.Release{Name: "web", Namespace: "ns", Version: 2, Info: &release.Info{Status: release.StatusPendingUpgrade}}
	raw, err := json.Marshal(Release{Release: rel, Progress: &progress.Progress{Phase: "waiting", Ready: 1, Total: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var helmView release.Release
	if err := json.Unmarshal(raw, &helmView); err != nil || helmView.Name != "web" || helmView.Version != 2 || helmView.Info.Status != release.StatusPendingUpgrade {
		t.Errorf("Helm's view %+v, %v", helmView, err)
	}
	if !strings.Contains(string(raw), `"progress":{"phase":"waiting","ready":1,"total":2`) {
		t.Errorf("progress missing: %s", raw)
	}
	plain, _ := json.Marshal(Release{Release: rel})
	if strings.Contains(string(plain), "progress") {
		t.Errorf("a final release carries progress: %s", plain)
	}
	c, _ := json.Marshal(Cancelled{Name: "web", Namespace: "ns", Revision: 2, Status: "cancelling"})
	if string(c) != `{"name":"web","namespace":"ns","revision":2,"status":"cancelling"}` {
		t.Errorf("cancel answer %s", c)
	}
}
