package source

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

// The scan's gunzip is the only one of a chart's own archive: what Helm's loader loads, it
// loads, and what Helm's refuses it refuses in Helm's words (review 11, M1): a reserved gzip
// flag bit, a header cut in its file name, corrupt deflate data.
func TestTheScansGunzipDecidesAsHelmsDoes(t *testing.T) {
	good := tgz(t, chartYAML("top"), entry{Name: "top/values.yaml", Data: []byte("x: 1\nlist: [1, 2, 3]\n")},
		entry{Name: "top/templates/a.yaml", Data: bytes.Repeat([]byte("kind: A\nmetadata: {name: a}\n"), 200)})
	reserved := bytes.Clone(good)
	reserved[3] |= 0x20
	cases := map[string][]byte{"reserved flag bit": reserved,
		"cut file name": {0x1f, 0x8b, 8, 8, 0, 0, 0, 0, 0, 0xff, 'c', 'h', 'a', 'r', 't'}}
	rng := rand.New(rand.NewSource(11))
	for i := range 40 {
		flipped := bytes.Clone(good)
		flipped[10+rng.Intn(len(flipped)-18)] ^= byte(1 + rng.Intn(255))
		cases["corrupt deflate "+string(rune('a'+i%26))+string(rune('0'+i/26))] = flipped
	}
	for name, archive := range cases {
		_, helmErr := loader.LoadArchive(bytes.NewReader(archive))
		_, ourErr := Budget{}.Load(archive)
		switch {
		case helmErr == nil && ourErr != nil:
			t.Errorf("%s: Helm loads it; ours: %v", name, ourErr)
		case helmErr != nil && (ourErr == nil || !strings.HasSuffix(ourErr.Error(), ": "+helmErr.Error())):
			t.Errorf("%s: ours %v, Helm's %q", name, ourErr, helmErr)
		}
	}
}
