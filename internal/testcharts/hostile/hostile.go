// Package hostile makes chart archives a hostile tenant would send (a nested archive bomb,
// an endless template), small on disk, for the tests of the bounds that refuse them.
package hostile

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"testing"
)

// Entry is one file of an archive: Data, or Size zero bytes streamed (a bomb's files never
// exist in the test's memory).
type Entry struct {
	Name string
	Data []byte
	Size int64
}

// Archive packs entries as a gzip'd tar, as helm package does.
func Archive(t testing.TB, entries ...Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		size, r := e.Size, io.Reader(io.LimitReader(zeros{}, e.Size))
		if e.Data != nil {
			size, r = int64(len(e.Data)), bytes.NewReader(e.Data)
		}
		if err := tw.WriteHeader(&tar.Header{Name: e.Name, Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// ChartYAML is the Chart.yaml of a chart named name (version 0.1.0), under dir name.
func ChartYAML(name string) Entry {
	return Entry{Name: name + "/Chart.yaml", Data: []byte("apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n")}
}

// Bomb is chart "bomb" 0.1.0 with n subchart archives, each unpacking to about each bytes
// of zeros in 4 MiB files (under Helm's 5 MiB per file and 100 MiB per archive): 3 x 96 MiB
// is about 7 KiB on the wire.
func Bomb(t testing.TB, n int, each int64) []byte {
	t.Helper()
	files := []Entry{ChartYAML("sub")}
	for i := int64(0); i < each/(4<<20); i++ {
		files = append(files, Entry{Name: fmt.Sprintf("sub/files/zero%d", i), Size: 4 << 20})
	}
	sub := Archive(t, files...)
	top := []Entry{ChartYAML("bomb")}
	for i := 0; i < n; i++ {
		top = append(top, Entry{Name: fmt.Sprintf("bomb/charts/sub%d.tgz", i), Data: sub})
	}
	return Archive(t, top...)
}

// Nested is chart "level<depth>" whose subchart archive holds a subchart archive, depth
// levels deep.
func Nested(t testing.TB, depth int) []byte {
	t.Helper()
	inner := Archive(t, ChartYAML("level0"))
	for i := 1; i <= depth; i++ {
		name := fmt.Sprintf("level%d", i)
		inner = Archive(t, ChartYAML(name), Entry{Name: fmt.Sprintf("%s/charts/level%d.tgz", name, i-1), Data: inner})
	}
	return inner
}

// EndlessTemplate loops 10^15 times: rendering it never ends.
const EndlessTemplate = `{{- range $i := until 100000 }}{{- range $j := until 100000 }}{{- range $k := until 100000 }}{{- end }}{{- end }}{{- end }}`

// Endless is chart "endless" 0.1.0 whose one template is EndlessTemplate.
func Endless(t testing.TB) []byte {
	t.Helper()
	return Archive(t, ChartYAML("endless"), Entry{Name: "endless/templates/cm.yaml", Data: []byte(EndlessTemplate)})
}

// AliasBomb is YAML (prefix, then a list "x-bomb") holding one anchored scalar of size bytes
// aliased n times: sigs.k8s.io/yaml writes every alias out, so it parses into about n x size
// bytes, while go-yaml's alias guard counts nodes and lets it through below 1,000 of them.
func AliasBomb(prefix string, size, n int) []byte {
	var b bytes.Buffer
	b.WriteString(prefix)
	b.WriteString("x-bomb:\n- &a \"")
	b.Write(bytes.Repeat([]byte("A"), size))
	b.WriteString("\"\n")
	for i := 0; i < n; i++ {
		b.WriteString("- *a\n")
	}
	return b.Bytes()
}
