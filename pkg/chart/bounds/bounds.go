// Package bounds holds the bounds of a chart and of what fetching and checking charts holds,
// in one place: every size, node, count and time a chart, its values check, an index or a
// cache may reach. Settings (CHART_MAX_*) override the unpack budget's defaults
// (source.Settings); the rest are fixed. It imports nothing, so every package of the chart
// tree, and those that check what charts carry, can name them.
package bounds

import "time"

// DefaultArchiveBytes bounds a chart archive as downloaded (source.Source.MaxBytes).
const DefaultArchiveBytes = 20 << 20

// The unpack budget's defaults (source.DefaultBudget): far above real charts (the largest
// common charts unpack to a few MiB; GitLab 6.5.4's 42 loader files count 12,199 nodes)
// and far below submit's 512 Mi, which also holds the parsed chart and requests in flight
// (100,000 nodes parse in at most ~45 MiB).
const (
	DefaultUnpackedBytes  = 64 << 20
	DefaultFiles          = 10000
	DefaultDepth          = 5
	DefaultYAMLNodes      = 100_000
	DefaultSchemaSubnodes = 20_000
)

// DefaultCRDNodes bounds the nodes of a chart's crds/ files (source.Budget.MaxCRDNodes). Real
// CRD sets count 25 to 37 bytes a node (cert-manager v1.16.3's six CRDs: 948 KB, 25,380
// nodes; Gateway API v1.1.0's experimental CRDs: 961 KB, 38,056 nodes), so 500,000 nodes are
// 12 MiB or more of real CRDs, about twice kube-prometheus-stack's crds/ (4 to 6 MB, not
// measured here). Dense YAML costs Helm's install ~216 bytes a node: ~110 MiB of the
// executor at the bound.
const DefaultCRDNodes = 500_000

// ParsedNodeBytes is what a parsed YAML node of a loaded chart holds in its values and
// metadata (up to ~184 bytes per node counted, in the densest shape measured, "{a},"): the
// cache counts it beside the files, or a chart of a few KiB of such values would hold
// megabytes while counted as kilobytes.
const ParsedNodeBytes = 256

// MaxAliasedNodes bounds the nodes of a YAML stream with aliases before its aliases are
// measured (yamlsize.Expanded: go-yaml v3's parse tree takes about 64 bytes per node), far
// above real charts' values and indexes that use anchors (a few thousand nodes).
const MaxAliasedNodes = 200_000

// MaxRenderedBytes and MaxRenderedNodes bound a chart's rendered manifests, aliases written
// out, over the whole render (the template route's output too), and so the manifests of a
// record Helm parses (storage.Measure): real charts render to a few MiB, and Helm's parses
// hold up to ~450 bytes a node, near 200 MiB at the bound. GitLab 6.5.4 renders to ~14,000.
const (
	MaxRenderedBytes = 16 << 20
	MaxRenderedNodes = 500_000
)

// MaxSchemaString bounds a string of a values.schema.json: a pattern is compiled as a
// regular expression (by Helm in the executor too; helmexec.MaxPatternBytes is this
// bound), in time and memory linear in its length but large (a pattern of 5 MB, 5 KiB in an
// archive, took 10.9 s and 615 MiB). Real schemas' strings are descriptions and patterns of
// a line or two.
const MaxSchemaString = 16 << 10

// A check of values against a schema with references, or whose subschemas times the values'
// nodes pass InProcessCheckWork, runs in a child (helmexec.DefaultValuesLimits): a real schema
// checks real values in milliseconds and a few MiB.
const (
	InProcessCheckWork = 1 << 20
	ValuesCheckTime    = 10 * time.Second
	ValuesCheckMemory  = 256 << 20
	ValuesCheckOutput  = 1 << 20
	ValuesChecksAtOnce = 2
)

// Submit keeps compiled schemas by chart digest; a schema of more than SmallSchemaNodes
// subschemas or SmallSchemaBytes can hold several MiB compiled (20,000 subschemas ~8 MiB; a
// pattern compiled holds ~46 bytes a byte), so only LargeSchemasKept of those are kept.
const (
	SmallSchemaNodes = 1000
	SmallSchemaBytes = 16 << 10
	LargeSchemasKept = 4
)

// The times of fetching what a chart repository or registry serves: every connection's dial
// and TLS handshake, the wait for a response's headers, a download by a Source without its
// own client, an index fetch of the console's index, and the listing of a namespace's
// repository objects.
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

// MaxIndexNodes bounds the YAML nodes of an index.yaml, with aliases written out
// (yamlsize.Expanded): a real index counts about one node per 11 bytes (4.5 MiB of it
// count 400,000); 3.5 MiB of "{name}," count a million and took ~700 MiB to parse
// (ChartVersion and Metadata structs for each). It is also what the source parses at once,
// across every index.
const MaxIndexNodes = 400_000

// MaxIndexFetches bounds the fetches under way in a process, an index's (download and
// parse) or a chart archive's: one can hold a 10 MiB index.yaml and about 68 MiB once parsed,
// or a DefaultArchiveBytes archive, and submit's memory is every namespace's. The console's
// index (pkg/chart/repos: its refresh, requests and refetches) and every chart fetch share it.
const MaxIndexFetches = 4

// DefaultCacheBytes is the chart cache's bound when none is set: well under submit's
// memory limit (512 MiB), which also holds requests in flight.
const DefaultCacheBytes = 128 << 20

// The bounds of the console's index (pkg/chart/repos): the parsed indexes kept, and the
// merged index it encodes. Encoding takes several times the output's size while it runs;
// one runs at a time, the slot shared fairly between tenants.
const (
	// IndexCacheBytes bounds what the parsed indexes of all repositories hold.
	IndexCacheBytes = 64 << 20
	// MaxIndexCost bounds one parsed index: a 10 MiB index.yaml (MaxIndexBytes) held
	// about 68 MiB once parsed.
	MaxIndexCost = 32 << 20
	// MaxMergedIndexCost bounds what one encoding reads: the estimated live bytes of the
	// indexes merged, checked before anything is encoded.
	MaxMergedIndexCost = 48 << 20
	// MaxIndexYAMLBytes bounds one encoded index.
	MaxIndexYAMLBytes = 16 << 20
	// IndexYAMLCacheBytes bounds the encoded indexes kept; a tenant keeps at most half.
	IndexYAMLCacheBytes = 32 << 20
)

// MaxDependencyMatching bounds the work of Helm's dependency matching in a chart's processed
// tree (source.Budget): each Chart.yaml entry against each subchart, one a pair, and for a
// subchart of its name the bytes of the semver constraint and version parsed: at ~0.65 µs of
// CPU a byte (loaded), Helm's two matches a pass take ~0.35 s at the bound. GitLab 6.5.4
// counts 143.
const MaxDependencyMatching = 1 << 18

// MaxValuesCopied bounds the value nodes Helm's dependency processing copies: every chart of
// a processed tree that lists dependencies (an empty list too) copies the coalesced values
// whole (processDependencyEnabled), a chart's own (source.Budget) and a request's
// (source.ChargeValues) each up to this bound. A copy costs ~200 bytes allocated and under
// 1 µs of CPU a node (2,000 copies of ~48,000 nodes took 66 s and 18.5 GB): ~200 MiB of
// garbage and under a second at the bound, where an umbrella of 10 charts listing dependencies
// may hold DefaultYAMLNodes of values. GitLab 6.5.4's copies count 55,688.
const MaxValuesCopied = 1_000_000
