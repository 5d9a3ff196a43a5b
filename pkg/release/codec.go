package release

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// gzipMagic starts a gzipped payload; Helm stores older records as plain JSON.
var gzipMagic = []byte{0x1f, 0x8b, 0x08}

var gzipReaders sync.Pool

// MaxRecordBytes bounds a decoded record: a tenant's gzipped payload may expand a
// thousandfold. 16 MiB is far above Helm's own records (GitLab's holds ~1.5 MiB), and low
// enough for the notifier's parallel workers and one Helm List.
const MaxRecordBytes = 16 << 20

// MaxRecordNodes bounds the JSON values of a decoded record (yamlsize.JSONNodes): its bytes
// do not bound its maps (`{}` is a map every three bytes). GitLab 6.5.4's record counts
// ~2,000; 400,000 holds ~12 MiB.
const MaxRecordNodes = 400_000

// ErrUndecodable is a release record that is not base64 of (gzipped) JSON of a release,
// or that decodes to more than MaxRecordBytes or MaxRecordNodes: a hand-made or damaged Secret.
var ErrUndecodable = errors.New("release record does not decode")

// DecodeInto decodes a release secret's payload (base64 of gzipped JSON, Helm's format)
// into v; a v with fewer fields than Helm's Release skips the rest unallocated. It is the one
// guarded decode: bounded in size, every failure (even a panic) an ErrUndecodable.
func DecodeInto(data []byte, v any) error {
	_, err := decode(data, v, recordBound, "")
	return err
}

func decodeInto(data []byte, v any, limit int, tenant string) error {
	_, err := decode(data, v, readBudget{bytes: limit, nodes: MaxRecordNodes}, tenant)
	return err
}

// readBudget is what decoding may take: decompressed bytes and JSON values (nodes).
type readBudget struct{ bytes, nodes int }

// recordBound is one record's.
var recordBound = readBudget{bytes: MaxRecordBytes, nodes: MaxRecordNodes}

// errTooLarge marks a record refused for its decoded size (always with ErrUndecodable):
// decodeAll tells a record over its read's remaining budget from a broken one by it.
var errTooLarge = errors.New("too large")

// decode is the guarded decode under bound; it returns the decoded (decompressed) size and
// nodes. Twice that size is held from inFlight, on tenant's account, while it decodes.
func decode(data []byte, v any, bound readBudget, tenant string) (cost readBudget, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: panic: %v", ErrUndecodable, r)
		}
	}()
	if len(data) == 0 {
		return cost, fmt.Errorf("%w: no payload", ErrUndecodable)
	}
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(data)))
	n, err := base64.StdEncoding.Decode(raw, data)
	if err != nil {
		return cost, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	raw = raw[:n]
	size := len(raw)
	gzipped := bytes.HasPrefix(raw, gzipMagic)
	if gzipped {
		if size, err = gzipSize(raw, bound.bytes); err != nil {
			return cost, err
		}
	}
	if size > bound.bytes {
		return cost, fmt.Errorf("%w: %w: more than %d bytes", ErrUndecodable, errTooLarge, bound.bytes)
	}
	inFlight.take(tenant, 2*size) // the decompressed payload, and what it decodes to
	defer inFlight.give(tenant, 2*size)
	if gzipped {
		if raw, err = gunzip(raw, size); err != nil {
			return cost, err
		}
	}
	nodes := int(yamlsize.JSONNodes(raw, int64(bound.nodes)))
	if nodes > bound.nodes {
		return cost, fmt.Errorf("%w: %w: more than %d JSON values", ErrUndecodable, errTooLarge, bound.nodes)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return cost, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return readBudget{bytes: size, nodes: nodes}, nil
}

// gzipSize is the decompressed size a gzipped payload announces in its trailer (ISIZE),
// refused over limit before anything is decompressed: a bomb costs nothing to refuse.
// gunzip then holds the payload to it, so the trailer cannot lie about the memory taken.
func gzipSize(raw []byte, limit int) (int, error) {
	if len(raw) < 18 { // header (10) and trailer (8) at least
		return 0, fmt.Errorf("%w: truncated gzip", ErrUndecodable)
	}
	size := binary.LittleEndian.Uint32(raw[len(raw)-4:])
	if uint64(size) > uint64(limit) {
		return 0, fmt.Errorf("%w: %w: decompresses to more than %d bytes", ErrUndecodable, errTooLarge, limit)
	}
	return int(size), nil
}

// gunzip decompresses exactly size bytes (the trailer's) and refuses one byte more (several
// gzip members, which Helm never writes) and a checksum that does not match.
func gunzip(raw []byte, size int) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	if zr == nil {
		zr = new(gzip.Reader)
	}
	defer gzipReaders.Put(zr)
	if err := zr.Reset(bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	out := make([]byte, size)
	if _, err := io.ReadFull(zr, out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	var one [1]byte
	switch n, err := io.ReadFull(zr, one[:]); {
	case n != 0:
		return nil, fmt.Errorf("%w: %w: decompresses to more than its gzip trailer's %d bytes", ErrUndecodable, errTooLarge, size)
	case err != io.EOF:
		return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return out, nil
}

// DecodeRelease decodes a whole record, and refuses one Helm's code would dereference nil
// in (no info, no chart metadata, a null entry in a list).
func DecodeRelease(data []byte) (*helmrelease.Release, error) {
	rls, _, _, err := decodeRecord(data, recordBound, "")
	return rls, err
}

// decodeRecord is DecodeRelease under bound, on tenant's account, with the apply_method
// Helm v4 keeps beside v3's fields and the decoded size and nodes.
func decodeRecord(data []byte, bound readBudget, tenant string) (*helmrelease.Release, string, readBudget, error) {
	var rec struct {
		helmrelease.Release
		ApplyMethod string `json:"apply_method"`
	}
	cost, err := decode(data, &rec, bound, tenant)
	if err != nil {
		return nil, "", cost, err
	}
	rls := &rec.Release
	if rls.Info == nil || rls.Chart == nil || rls.Chart.Metadata == nil {
		return nil, "", cost, fmt.Errorf("%w: no info or chart metadata", ErrUndecodable)
	}
	if what := nullEntry(rls); what != "" {
		return nil, "", cost, fmt.Errorf("%w: a null entry in %s", ErrUndecodable, what)
	}
	return rls, rec.ApplyMethod, cost, nil
}

// nullEntry names the first list of rls holding a null entry ("" when none). Valid JSON
// may say `"hooks":[null]`; Helm ranges over these lists and dereferences every entry
// (a rollback onto such a record panicked in Helm's hook code).
func nullEntry(rls *helmrelease.Release) string {
	for _, h := range rls.Hooks {
		if h == nil {
			return "hooks"
		}
	}
	c, md := rls.Chart, rls.Chart.Metadata
	switch {
	case hasNil(c.Templates):
		return "chart.templates"
	case hasNil(c.Files):
		return "chart.files"
	case hasNil(md.Dependencies):
		return "chart.metadata.dependencies"
	case hasNil(md.Maintainers):
		return "chart.metadata.maintainers"
	case c.Lock != nil && hasNil(c.Lock.Dependencies):
		return "chart.lock.dependencies"
	}
	return ""
}

func hasNil[T any](list []*T) bool {
	for _, e := range list {
		if e == nil {
			return true
		}
	}
	return false
}

// Head is what status reports and lists need of a record: decoding only these fields
// skips the manifest, values and chart files without allocating them.
type Head struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Info      *struct {
		Status      string `json:"status"`
		Description string `json:"description"`
	} `json:"info"`
	Chart *struct {
		Metadata *struct {
			Name       string `json:"name"`
			Version    string `json:"version"`
			AppVersion string `json:"appVersion"`
		} `json:"metadata"`
	} `json:"chart"`
}

// ChartMeta is the head's chart name, version and app version ("" when absent).
func (h *Head) ChartMeta() (name, version, appVersion string) {
	if h.Chart == nil || h.Chart.Metadata == nil {
		return "", "", ""
	}
	m := h.Chart.Metadata
	return m.Name, m.Version, m.AppVersion
}

// Description is the head's info.description ("" when absent).
func (h *Head) Description() string {
	if h.Info == nil {
		return ""
	}
	return h.Info.Description
}

// inFlight bounds the decompressed bytes every decode holds at once, process-wide, per
// tenant (the namespace read): a few small hostile Secrets that each expand to MaxRecordBytes
// would add up past the memory limit. A decode waits for its share rather than fail (a
// legitimate record would read as undecodable); every holder gives it back once decoded.
var inFlight = newByteBudget(4 * MaxRecordBytes)

func decodeHead(data []byte, tenant string) (Head, error) {
	var h Head
	_, err := decode(data, &h, recordBound, tenant)
	return h, err
}

// byteBudget is a weighted semaphore of bytes handed out fairly: of the waiters, the
// oldest of the tenant holding the fewest bytes is served next, and none passes it (a large
// share is not starved by small ones; none holds part of a share while another waits).
type byteBudget struct {
	mu      sync.Mutex
	free    int
	held    map[string]int
	waiting []*byteWaiter
}

type byteWaiter struct {
	tenant string
	n      int
	ready  chan struct{}
}

func newByteBudget(n int) *byteBudget { return &byteBudget{free: n, held: map[string]int{}} }

// take waits until n bytes are given to tenant; n must not pass the budget's size.
func (b *byteBudget) take(tenant string, n int) {
	b.mu.Lock()
	w := &byteWaiter{tenant: tenant, n: n, ready: make(chan struct{})}
	b.waiting = append(b.waiting, w)
	b.grant()
	b.mu.Unlock()
	<-w.ready
}

func (b *byteBudget) give(tenant string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	if b.held[tenant] -= n; b.held[tenant] <= 0 {
		delete(b.held, tenant)
	}
	b.grant()
}

// grant serves the waiters in turn while the next one's share is free.
func (b *byteBudget) grant() {
	for len(b.waiting) > 0 {
		next := 0
		for i, w := range b.waiting {
			if b.held[w.tenant] < b.held[b.waiting[next].tenant] {
				next = i
			}
		}
		w := b.waiting[next]
		if w.n > b.free {
			return
		}
		b.free -= w.n
		b.held[w.tenant] += w.n
		b.waiting = append(b.waiting[:next], b.waiting[next+1:]...)
		close(w.ready)
	}
}

// gzipWriters reuse compressors: gzip.NewWriterLevel allocates ~1 MiB of state, which in
// each reservation's encoding was 12% of submit's CPU.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return w
}}

// EncodeRelease is Helm v3's encodeRelease (JSON, gzipped at BestCompression, base64),
// byte for byte, with the compressor reused.
func EncodeRelease(rls *helmrelease.Release) ([]byte, error) {
	b, err := json.Marshal(rls)
	if err != nil {
		return nil, fmt.Errorf("encode release %s: %w", rls.Name, err)
	}
	out, err := encodePayload(b)
	if err != nil {
		return nil, fmt.Errorf("encode release %s: %w", rls.Name, err)
	}
	return out, nil
}

// encodePayload is a record's JSON as Helm stores it: gzipped at BestCompression, base64.
func encodePayload(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(buf.Len()))
	base64.StdEncoding.Encode(out, buf.Bytes())
	return out, nil
}

// newRecord is the Secret Helm's Secrets driver creates for rls under key (Helm v3's
// Secrets.Create and newSecretsObject: the release's own labels, createdAt, then name,
// owner, status and version; type helm.sh/release.v1; data "release").
func newRecord(key string, rls *helmrelease.Release, now time.Time) (*corev1.Secret, error) {
	data, err := EncodeRelease(rls)
	if err != nil {
		return nil, err
	}
	labels := make(map[string]string, len(rls.Labels)+5)
	for k, v := range rls.Labels {
		labels[k] = v
	}
	labels["createdAt"] = strconv.FormatInt(now.Unix(), 10)
	labels[LabelName], labels[LabelOwner] = rls.Name, OwnerHelm
	labels[LabelStatus], labels[LabelVersion] = rls.Info.Status.String(), strconv.Itoa(rls.Version)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: labels}, Type: SecretType,
		Data: map[string][]byte{"release": data}}, nil
}
