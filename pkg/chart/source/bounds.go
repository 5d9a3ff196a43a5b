package source

// The bounds of a chart and of what fetching charts holds, in one place: every size, node
// and count a chart, an index or the cache may reach. Settings (CHART_MAX_*) override
// DefaultBudget's; the rest are fixed.

// DefaultMaxBytes bounds a chart archive as downloaded (Source.MaxBytes).
const DefaultMaxBytes = 20 << 20

// DefaultBudget is far above real charts (the largest common charts unpack to a few MiB;
// GitLab 6.5.4's 42 loader files count 12,199 nodes) and far below submit's 512 Mi, which
// also holds the parsed chart and requests in flight (100,000 nodes parse in at most ~45 MiB).
var DefaultBudget = Budget{MaxBytes: 64 << 20, MaxFiles: 10000, MaxDepth: 5, MaxNodes: 100_000, MaxSchemaNodes: 20_000}

// parsedNodeBytes is what a parsed YAML node of a loaded chart holds in its values and
// metadata (up to ~184 bytes per node counted, in the densest shape measured, "{a},"): the
// cache counts it beside the files, or a chart of a few KiB of such values would hold
// megabytes while counted as kilobytes.
const parsedNodeBytes = 256

// MaxSchemaString bounds a string of a values.schema.json: a pattern is compiled as a
// regular expression (by Helm in the executor too; helmexec.MaxPatternBytes is this
// bound), in time and memory linear in its
// length but large (a pattern of 5 MB, 5 KiB in an archive, took 10.9 s and 615 MiB).
// Real schemas' strings are descriptions and patterns of a line or two.
const MaxSchemaString = 16 << 10

// MaxIndexBytes bounds a repository's index.yaml (the console's bound).
const MaxIndexBytes = 10 << 20

// MaxIndexNodes bounds the YAML nodes of an index.yaml, with aliases written out
// (yamlsize.Expanded): a real index counts about one node per 11 bytes (4.5 MiB of it
// count 400,000); 3.5 MiB of "{name}," count a million and took ~700 MiB to parse
// (ChartVersion and Metadata structs for each). It is also what the source parses at once,
// across every index (parseIndex).
const MaxIndexNodes = 400_000

// MaxIndexFetches bounds the index fetches (download and parse) under way in the whole
// service: one can hold a 10 MiB index.yaml and about 68 MiB once parsed, and submit's
// memory is every namespace's. The console's index (pkg/chart/repos: its refresh, requests
// and refetches) and the installs by index entry share it.
const MaxIndexFetches = 4

// DefaultCacheBytes is the cache's bound when none is set: well under submit's memory
// limit (512 MiB), which also holds requests in flight.
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
