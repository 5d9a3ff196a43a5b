package helmexec

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

// frameOf is a frame of v whose parts claim sizes and hold raw.
func frameOf(t *testing.T, v any, sizes []int, raw string) []byte {
	t.Helper()
	var b []byte
	for _, x := range []any{v, sizes} {
		j, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		b = append(binary.BigEndian.AppendUint64(b, uint64(len(j))), j...)
	}
	return append(b, raw...)
}

// frameTree is a chart and a subchart with templates, files, a nil file, and schemas nil,
// empty and set: each comes back as it went.
func frameTree() ChartTree {
	sub := &chart.Chart{Metadata: &chart.Metadata{Name: "sub"}, Schema: []byte{},
		Templates: []*chart.File{{Name: "templates/a.yaml", Data: []byte("a: \"\\x00\xff\"\n")}, {Name: "templates/empty.yaml", Data: []byte{}}}}
	top := &chart.Chart{Metadata: &chart.Metadata{Name: "top"}, Values: map[string]any{"x": 1.0},
		Templates: []*chart.File{{Name: "templates/b.yaml", Data: []byte("b: {{ .Values.x }}")}, nil},
		Files:     []*chart.File{{Name: "README.md", Data: []byte("read me")}, {Name: "nil.txt"}}}
	return ChartTree{Chart: top, Deps: []ChartTree{{Chart: sub, Deps: []ChartTree{{Chart: &chart.Chart{
		Metadata: &chart.Metadata{Name: "leaf"}, Schema: []byte(`{"type":"object"}`)}}}}}}
}

// A job's bytes travel raw after its JSON, and the chart sent (the cache's, shared) is left
// as it was.
func TestAJobsBytesTravelRaw(t *testing.T) {
	job := workerJob{Render: GuardRender{Chart: frameTree(), Values: map[string]any{"x": 2.0}}, Schemas: true,
		Archive: &ChartRender{Name: "web", Archive: []byte("\x1f\x8b archive")}}
	var b bytes.Buffer
	if err := writeJob(bufio.NewWriter(&b), job); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(job.Render.Chart, frameTree()) {
		t.Fatal("writeJob changed the chart it sent")
	}
	if !bytes.Contains(b.Bytes(), []byte("\x1f\x8b archiveb: {{ .Values.x }}read mea: \"\\x00\xff\"\n")) {
		t.Fatalf("the files are not raw in the frame: %q", b.String())
	}
	got, err := readJob(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, job) {
		t.Fatalf("read back %+v, want %+v", got, job)
	}
	if b.Len() != 0 {
		t.Fatalf("%d bytes left after the job", b.Len())
	}
}

// A result's files travel raw after its JSON.
func TestAResultsFilesTravelRaw(t *testing.T) {
	res := workerResult{Files: map[string]string{"t/a.yaml": "a: \"1\"\n", "t/b.yaml": "", "t/c.yaml": "\xff"}, HeapBytes: 7}
	var b bytes.Buffer
	if err := writeResult(bufio.NewWriter(&b), res); err != nil {
		t.Fatal(err)
	}
	m, err := readMsg(&b, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	res.Names = []string{"t/a.yaml", "t/b.yaml", "t/c.yaml"} // the order they travel in
	if m.Result == nil || !reflect.DeepEqual(*m.Result, res) {
		t.Fatalf("read back %+v, want %+v", m.Result, res)
	}
}

// A frame cut short, over its bound, or whose sizes do not match what it holds is refused
// with an error saying so, before anything that large is allocated.
func TestMalformedFramesAreRefused(t *testing.T) {
	var job bytes.Buffer
	if err := writeJob(bufio.NewWriter(&job), workerJob{Render: GuardRender{Chart: frameTree()}}); err != nil {
		t.Fatal(err)
	}
	res := frameOf(t, workerMsg{Result: &workerResult{Names: []string{"a", "b"}}}, []int{3, 4}, "aaabbbb")
	one := workerJob{Render: GuardRender{Chart: ChartTree{Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "c"},
		Templates: []*chart.File{{Name: "t"}}}}}} // two blobs: its template and its schema
	for _, c := range []struct {
		name  string
		frame []byte
		msg   int64 // read as a worker's answer within msg bytes, else as a job
		want  string
	}{
		{name: "job cut in its header", frame: job.Bytes()[:20], want: "read a frame: unexpected EOF"},
		{name: "job cut in its files", frame: job.Bytes()[:job.Len()-1], want: "read a frame's parts: unexpected EOF"},
		{name: "job header over the bound", frame: binary.BigEndian.AppendUint64(nil, maxJobBytes+1),
			want: "frame over its bound: 1073741825 bytes"},
		{name: "job files over the bound", frame: frameOf(t, one, []int{maxJobBytes, -1}, ""),
			want: "frame over its bound: a part of 1073741824 bytes"},
		{name: "job with more parts than files", frame: frameOf(t, one, []int{0, -1, 0}, ""),
			want: "a job of 2 files sent 3"},
		{name: "job with fewer parts than files", frame: frameOf(t, one, nil, ""), want: "a job of 2 files sent 0"},
		{name: "job with a negative size", frame: frameOf(t, one, []int{-2, -1}, ""), want: "a frame's part of -2 bytes"},
		{name: "answer cut in its files", msg: 1 << 20, frame: res[:len(res)-2], want: "read a frame's parts: unexpected EOF"},
		{name: "answer over the bound", msg: int64(len(res)) - 16 - 1, frame: res,
			want: "frame over its bound: a part of 4 bytes"},
		{name: "answer with more names than files", msg: 1 << 20, want: "a result of 2 files sent 1",
			frame: frameOf(t, workerMsg{Result: &workerResult{Names: []string{"a", "b"}}}, []int{3}, "aaa")},
	} {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.msg > 0 {
				_, err = readMsg(bytes.NewReader(c.frame), c.msg)
			} else {
				_, err = readJob(bytes.NewReader(c.frame))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
			if strings.Contains(c.want, "over its bound") && !errors.Is(err, errFrameTooLarge) {
				t.Fatalf("%v is not errFrameTooLarge", err)
			}
		})
	}
	if _, err := readJob(bytes.NewReader(nil)); !errors.Is(err, io.EOF) {
		t.Fatalf("no job at all: %v, want io.EOF (the parent closed the pipe)", err)
	}
}
