package helmexec

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"helm.sh/helm/v3/pkg/chart"
)

// maxJobBytes bounds a job a worker reads, its files included (the worker's memory bound
// stops a smaller job that expands).
const maxJobBytes = 1 << 30

// errFrameTooLarge is a frame longer than its reader allows.
var errFrameTooLarge = errors.New("frame over its bound")

// writeFrame writes v's JSON and the sizes of raw (-1: nil), each after its length (8 bytes,
// big-endian), then raw as it is: JSON would base64 bytes and escape a manifest's text.
func writeFrame(w *bufio.Writer, v any, raw ...[]byte) error {
	sizes := make([]int, len(raw))
	for i, b := range raw {
		sizes[i] = len(b)
		if b == nil {
			sizes[i] = -1
		}
	}
	for _, x := range []any{v, sizes} {
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		if _, err := w.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b)))); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	for _, b := range raw {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return w.Flush()
}

// readFrame reads a frame of at most limit bytes into v, and returns its raw parts.
func readFrame(r io.Reader, limit int64, v any) ([][]byte, error) {
	n, err := readJSON(r, limit, v)
	if err != nil {
		return nil, err
	}
	var sizes []int
	m, err := readJSON(r, limit-n, &sizes)
	if err != nil {
		return nil, err
	}
	total := n + m
	for _, s := range sizes {
		if s < -1 {
			return nil, fmt.Errorf("a frame's part of %d bytes", s)
		}
		if int64(s) > limit-total {
			return nil, fmt.Errorf("%w: a part of %d bytes after %d, bound %d", errFrameTooLarge, s, total, limit)
		}
		total += int64(max(s, 0))
	}
	buf := make([]byte, total-n-m)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("read a frame's parts: %w", err)
	}
	parts := make([][]byte, len(sizes))
	for i, s := range sizes {
		if s >= 0 {
			parts[i], buf = buf[:s:s], buf[s:]
		}
	}
	return parts, nil
}

// readJSON reads JSON of at most limit bytes after its length into v, and tells its length.
func readJSON(r io.Reader, limit int64, v any) (int64, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return 0, err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > uint64(limit) {
		return 0, fmt.Errorf("%w: %d bytes, bound %d", errFrameTooLarge, size, limit)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, fmt.Errorf("read a frame: %w", err)
	}
	return int64(size), json.Unmarshal(b, v)
}

// writeJob writes job, the bytes of its chart and archive (blobs) raw.
func writeJob(w *bufio.Writer, job workerJob) error {
	job.Render.Chart = job.Render.Chart.bare()
	if job.Archive != nil {
		a := *job.Archive
		job.Archive = &a
	}
	blobs := job.blobs()
	raw := make([][]byte, len(blobs))
	for i, b := range blobs {
		raw[i], *b = *b, nil
	}
	return writeFrame(w, job, raw...)
}

// readJob reads a job writeJob wrote, of at most maxJobBytes.
func readJob(r io.Reader) (workerJob, error) {
	var job workerJob
	raw, err := readFrame(r, maxJobBytes, &job)
	if err != nil {
		return job, err
	}
	blobs := job.blobs()
	if len(blobs) != len(raw) {
		return job, fmt.Errorf("a job of %d files sent %d", len(blobs), len(raw))
	}
	for i, b := range raw {
		*blobs[i] = b
	}
	return job, nil
}

// writeResult writes a worker's result, its files raw.
func writeResult(w *bufio.Writer, res workerResult) error {
	res.Names = slices.Sorted(maps.Keys(res.Files))
	raw := make([][]byte, len(res.Names))
	for i, n := range res.Names {
		raw[i] = []byte(res.Files[n])
	}
	return writeFrame(w, workerMsg{Result: &res}, raw...)
}

// readMsg reads what a worker wrote, of at most limit bytes with a result's files.
func readMsg(r io.Reader, limit int64) (workerMsg, error) {
	var m workerMsg
	raw, err := readFrame(r, limit, &m)
	switch {
	case err != nil || m.Result == nil:
		return m, err
	case len(m.Result.Names) != len(raw):
		return m, fmt.Errorf("a result of %d files sent %d", len(m.Result.Names), len(raw))
	case len(raw) > 0:
		m.Result.Files = make(map[string]string, len(raw))
	}
	for i, b := range raw {
		m.Result.Files[m.Result.Names[i]] = string(b)
	}
	return m, nil
}

// blobs are the job's bytes, in the order they travel.
func (j *workerJob) blobs() []*[]byte {
	var b []*[]byte
	if j.Archive != nil {
		b = append(b, &j.Archive.Archive)
	}
	return j.Render.Chart.blobs(b)
}

// blobs appends the tree's file and schema bytes to b.
func (t ChartTree) blobs(b []*[]byte) []*[]byte {
	if t.Chart == nil {
		return b
	}
	for _, files := range [][]*chart.File{t.Chart.Templates, t.Chart.Files} {
		for _, f := range files {
			if f != nil {
				b = append(b, &f.Data)
			}
		}
	}
	b = append(b, &t.Chart.Schema)
	for _, d := range t.Deps {
		b = d.blobs(b)
	}
	return b
}

// bare is t with copies of its charts and files, whose bytes the caller may take out: the
// tree's own are shared (the chart cache's).
func (t ChartTree) bare() ChartTree {
	if t.Chart == nil {
		return t
	}
	c := *t.Chart
	out := ChartTree{Chart: &c}
	for _, files := range []*[]*chart.File{&c.Templates, &c.Files} {
		*files = slices.Clone(*files) // nil stays nil
		for i, f := range *files {
			if f != nil {
				cp := *f
				(*files)[i] = &cp
			}
		}
	}
	for _, d := range t.Deps {
		out.Deps = append(out.Deps, d.bare())
	}
	return out
}
