package source

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// loadTree loads what Helm's LoadFiles loads, GitLab's 22 charts and the corners of its
// subchart rules alike: .prov files, names Helm skips, archives, directories in directories.
func TestLoadTreeIsHelmsLoadFiles(t *testing.T) {
	gitlab, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "charts", "gitlab-6.5.4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	meta := func(dir, name string) entry {
		return entry{Name: dir + "/Chart.yaml", Data: []byte("apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n")}
	}
	inner := tgz(t, chartYAML("packed"), entry{Name: "packed/values.yaml", Data: []byte("a: 1\n")},
		meta("packed/charts/deep", "deep"), entry{Name: "packed/charts/deep/values.yaml", Data: []byte("b: [1, 2]\n")})
	corners := tgz(t, chartYAML("top"), entry{Name: "top/values.yaml", Data: []byte("x: {y: z}\n")},
		entry{Name: "top/templates/a.yaml", Data: []byte("kind: A\n")},
		entry{Name: "top/charts/packed-0.1.0.tgz", Data: inner},
		entry{Name: "top/charts/packed-0.1.0.tgz.prov", Data: []byte("signed\n")},
		meta("top/charts/dir", "dir"), entry{Name: "top/charts/dir/values.yaml", Data: []byte("c: true\n")},
		meta("top/charts/dir/charts/leaf", "leaf"), entry{Name: "top/charts/dir/charts/leaf/README.md", Data: []byte("leaf\n")},
		meta("top/charts/_skipped", "skipped"), meta("top/charts/.hidden", "hidden"),
		entry{Name: "top/charts/_old.tgz/README.md", Data: []byte("skipped\n")})
	for name, archive := range map[string][]byte{"gitlab": gitlab, "corners": corners} {
		files, err := loader.LoadArchiveFiles(strings.NewReader(string(archive)))
		if err != nil {
			t.Fatal(err)
		}
		want, err := loader.LoadFiles(files)
		if err != nil {
			t.Fatal(err)
		}
		got, err := loadTree(files)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameChart(t, name, got, want)
	}
}

// A subchart's error is Helm's, in Helm's words.
func TestLoadTreeRefusesAsHelmDoes(t *testing.T) {
	for name, archive := range map[string][]byte{
		"no Chart.yaml": tgz(t, chartYAML("top"), entry{Name: "top/charts/sub/values.yaml", Data: []byte("a: 1\n")}),
		"deep bad values": tgz(t, chartYAML("top"), entry{Name: "top/charts/mid/Chart.yaml", Data: []byte("apiVersion: v2\nname: mid\nversion: 0.1.0\n")},
			entry{Name: "top/charts/mid/charts/sub/Chart.yaml", Data: []byte("apiVersion: v2\nname: sub\nversion: 0.1.0\n")}, entry{Name: "top/charts/mid/charts/sub/values.yaml", Data: []byte("a: [\n")}),
		"bad values":    tgz(t, chartYAML("top"), entry{Name: "top/charts/sub/Chart.yaml", Data: []byte("apiVersion: v2\nname: sub\nversion: 0.1.0\n")}, entry{Name: "top/charts/sub/values.yaml", Data: []byte("a: [\n")}),
		"a file":        tgz(t, chartYAML("top"), entry{Name: "top/charts/README.md", Data: []byte("no chart\n")}),
		"tgz directory": tgz(t, chartYAML("top"), entry{Name: "top/charts/sub.tgz/Chart.yaml", Data: []byte("name: sub\n")}),
	} {
		files, err := loader.LoadArchiveFiles(strings.NewReader(string(archive)))
		if err != nil {
			t.Fatal(err)
		}
		_, want := loader.LoadFiles(files)
		_, got := loadTree(files)
		if want == nil || got == nil || got.Error() != want.Error() {
			t.Errorf("%s: %v, Helm's %v", name, got, want)
		}
	}
}

// sameChart wants got and want equal, their dependencies compared by name.
func sameChart(t *testing.T, where string, got, want *chart.Chart) {
	t.Helper()
	for _, f := range []struct {
		what      string
		got, want any
	}{
		{"metadata", got.Metadata, want.Metadata}, {"lock", got.Lock, want.Lock}, {"values", got.Values, want.Values},
		{"schema", got.Schema, want.Schema}, {"templates", got.Templates, want.Templates},
		{"files", got.Files, want.Files}, {"raw", got.Raw, want.Raw},
	} {
		if !reflect.DeepEqual(f.got, f.want) {
			t.Errorf("%s: %s differ", where, f.what)
		}
	}
	byName := func(a, b *chart.Chart) int { return strings.Compare(a.Name(), b.Name()) }
	gd, wd := slices.SortedFunc(slices.Values(got.Dependencies()), byName), slices.SortedFunc(slices.Values(want.Dependencies()), byName)
	if len(gd) != len(wd) {
		t.Fatalf("%s: %d dependencies, Helm's %d", where, len(gd), len(wd))
	}
	for i := range gd {
		if gd[i].Parent() != got {
			t.Errorf("%s: %s's parent is not its chart", where, gd[i].Name())
		}
		sameChart(t, where+"/"+wd[i].Name(), gd[i], wd[i])
	}
}

// ahead ends its goroutine when the scan stops early (stop would wait forever otherwise),
// and hands the reader's error on as it is: the refusal stays in the same words.
func TestAheadStopsWithTheScanAndKeepsItsError(t *testing.T) {
	r, stop := ahead(zeros{})
	if _, err := io.ReadFull(r, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	stop()
	corrupt := errors.New("flate: corrupt input before offset 7")
	r, stop = ahead(iotest.ErrReader(corrupt))
	defer stop()
	if _, err := io.ReadAll(r); err != corrupt {
		t.Fatalf("got %v, want the reader's own error", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
