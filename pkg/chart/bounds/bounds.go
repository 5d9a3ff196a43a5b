// Package bounds holds, in one place, every size, node, count and time a chart, its values
// check, an index or a cache may reach. CHART_MAX_* override the unpack budget's defaults
// (source.Settings); the rest are fixed. It imports nothing: every package can name them.
package bounds

import "time"

// DefaultArchiveBytes bounds a chart archive as downloaded (source.Source.MaxBytes).
const DefaultArchiveBytes = 20 << 20

// The unpack budget's defaults (source.DefaultBudget): far above real charts (GitLab 6.5.4's
// loader files count 12,199 nodes) and far below submit's 512 Mi (100,000 nodes parse in at
// most ~45 MiB).
const (
	DefaultUnpackedBytes  = 64 << 20
	DefaultFiles          = 10000
	DefaultDepth          = 5
	DefaultYAMLNodes      = 100_000
	DefaultSchemaSubnodes = 20_000
)

// DefaultCRDNodes bounds the nodes of a chart's crds/ files. Real CRD sets count 25 to 37
// bytes a node (cert-manager v1.16.3: 25,380 nodes), so 500,000 nodes are 12 MiB or more of
// real CRDs, about twice kube-prometheus-stack's; dense YAML costs Helm's install ~216 bytes
// a node, ~110 MiB of the executor at the bound.
const DefaultCRDNodes = 500_000

// ParsedNodeBytes is what a parsed YAML node of a loaded chart holds (up to ~184 bytes
// measured, "{a},"): the cache counts it beside the files.
const ParsedNodeBytes = 256

// MaxAliasedNodes bounds the nodes of a YAML stream with aliases before they are measured
// (go-yaml v3's parse tree takes ~64 bytes a node); real files with anchors count thousands.
const MaxAliasedNodes = 200_000

// MaxRenderedBytes and MaxRenderedNodes bound a chart's rendered manifests, aliases written
// out (the template route's and a record's too): Helm's parses hold up to ~450 bytes a
// node, near 200 MiB at the bound; GitLab 6.5.4 renders to ~14,000.
const (
	MaxRenderedBytes = 16 << 20
	MaxRenderedNodes = 500_000
)

// MaxSchemaString bounds a string of a values.schema.json: a pattern is compiled as a
// regular expression (helmexec.MaxPatternBytes), in time and memory linear in its length
// but large (5 MB took 10.9 s and 615 MiB); real ones are a line or two.
const MaxSchemaString = 16 << 10

// A values check with references, or whose subschemas times values' nodes pass
// InProcessCheckWork, runs in a child (helmexec.DefaultValuesLimits); real ones take ms.
const (
	InProcessCheckWork = 1 << 20
	ValuesCheckTime    = 10 * time.Second
	ValuesCheckMemory  = 256 << 20
	ValuesCheckOutput  = 1 << 20
	ValuesChecksAtOnce = 2
)

// Submit keeps compiled schemas by chart digest; one over SmallSchemaNodes or
// SmallSchemaBytes can hold several MiB compiled (20,000 subschemas ~8 MiB), so only
// LargeSchemasKept of those are kept.
const (
	SmallSchemaNodes = 1000
	SmallSchemaBytes = 16 << 10
	LargeSchemasKept = 4
)

// The times of fetching from a chart repository or registry: a dial, a TLS handshake, a
// response's headers, a download (a Source without its own client), an index fetch, and
// the listing of a namespace's repository objects.
const (
	DialTime           = 10 * time.Second
	TLSHandshakeTime   = 10 * time.Second
	ResponseHeaderTime = 30 * time.Second
	DownloadTime       = time.Minute
	IndexFetchTime     = 30 * time.Second
	RepositoryListTime = 10 * time.Second
)

// MaxIndexBytes bounds a repository's index.yaml (the console's bound).
const MaxIndexBytes = 10 << 20

// MaxIndexNodes bounds the YAML nodes of an index.yaml, aliases written out, and of the
// indexes parsed at once: a real index counts a node per ~11 bytes (4.5 MiB: 400,000);
// 3.5 MiB of "{name}," count a million and took ~700 MiB to parse.
const MaxIndexNodes = 400_000

// MaxIndexFetches bounds the fetches under way in a process, of indexes (pkg/chart/repos)
// and archives together: one can hold a 10 MiB index.yaml, ~68 MiB parsed, or a
// DefaultArchiveBytes archive, and submit's memory is every namespace's.
const MaxIndexFetches = 4

// DefaultCacheBytes is the chart cache's bound when none is set: well under submit's 512 MiB.
const DefaultCacheBytes = 128 << 20

// The bounds of the console's index (pkg/chart/repos): the parsed indexes kept, and the
// merged index encoded (several times its size while it runs; one at a time).
const (
	// IndexCacheBytes bounds what the parsed indexes of all repositories hold.
	IndexCacheBytes = 64 << 20
	// MaxIndexCost bounds one parsed index: a 10 MiB index.yaml (MaxIndexBytes) held
	// about 68 MiB once parsed.
	MaxIndexCost = 32 << 20
	// MaxMergedIndexCost bounds the indexes one encoding reads, checked before it runs.
	MaxMergedIndexCost = 48 << 20
	// MaxIndexYAMLBytes bounds one encoded index.
	MaxIndexYAMLBytes = 16 << 20
	// IndexYAMLCacheBytes bounds the encoded indexes kept; a tenant keeps at most half.
	IndexYAMLCacheBytes = 32 << 20
)

// MaxDependencyMatching bounds Helm's dependency matching in a chart's processed tree: each
// Chart.yaml entry against each subchart, and the semver bytes parsed for one of its name;
// at ~0.65 µs a byte, Helm's two matches a pass take ~0.35 s at the bound (GitLab: 143).
const MaxDependencyMatching = 1 << 18

// MaxValuesCopied bounds the value nodes Helm's dependency processing copies (each chart
// that lists dependencies copies the coalesced values whole), a chart's own and a
// request's each. A copy costs ~200 bytes and under 1 µs a node (2,000 copies of ~48,000
// nodes took 66 s and 18.5 GB): ~200 MiB and under a second at the bound (GitLab: 55,688).
const MaxValuesCopied = 1_000_000
