package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// Budget bounds what one chart archive may unpack to, across its nested archives: Helm's
// loader gives every nested charts/*.tgz a fresh 100 MiB cap, so a few KiB of chart could
// unpack to gigabytes. Zero fields take DefaultBudget's.
type Budget struct {
	// MaxBytes bounds the sizes and names of every file at every level (a nested
	// archive's own bytes too: Helm keeps them as well as what they unpack to).
	MaxBytes int64
	MaxFiles int
	// MaxDepth bounds how deep archives nest inside the chart's own (1: its subcharts may
	// be archives, theirs may not).
	MaxDepth int
	// MaxNodes bounds the YAML nodes of the files Helm's loader parses, aliases written out
	// (yamlsize.Expanded): the parser's memory follows the nodes, and a few MiB of "{}," or
	// a few KiB of aliases would parse into gigabytes within MaxBytes.
	MaxNodes int64
	// MaxCRDNodes bounds the nodes of the crds/ files, which Helm's install parses whole
	// before any API call; real CRD sets are larger than values.
	MaxCRDNodes int64
	// MaxSchemaNodes bounds the subschemas of the values.schema.json files (SchemaNodes):
	// compiling takes time quadratic in them (300 KB of "{}," took 93 s in submit).
	MaxSchemaNodes int64
}

// DefaultBudget is the budget of a chart whose settings set none (package bounds).
var DefaultBudget = Budget{MaxBytes: bounds.DefaultUnpackedBytes, MaxFiles: bounds.DefaultFiles,
	MaxDepth: bounds.DefaultDepth, MaxNodes: bounds.DefaultYAMLNodes, MaxSchemaNodes: bounds.DefaultSchemaSubnodes,
	MaxCRDNodes: bounds.DefaultCRDNodes}

func (b Budget) withDefaults() Budget {
	d := DefaultBudget
	b.MaxBytes = positiveOr(b.MaxBytes, d.MaxBytes)
	b.MaxFiles = positiveOr(b.MaxFiles, d.MaxFiles)
	b.MaxDepth = positiveOr(b.MaxDepth, d.MaxDepth)
	b.MaxNodes = positiveOr(b.MaxNodes, d.MaxNodes)
	b.MaxSchemaNodes = positiveOr(b.MaxSchemaNodes, d.MaxSchemaNodes)
	b.MaxCRDNodes = positiveOr(b.MaxCRDNodes, d.MaxCRDNodes)
	return b
}

// positiveOr is a bound as set, or its default when unset (0) or not a bound (negative).
func positiveOr[T ~int | ~int64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// BudgetError is a chart over its budget; errors.Is(err, ErrTooLarge) is true.
type BudgetError struct {
	// Bound says which, e.g. "unpacks to more than 64 MiB across its nested archives".
	Bound string
}

func (e *BudgetError) Error() string { return "chart " + e.Bound }

// Is makes errors.Is(err, ErrTooLarge) true: the edge answers 422.
func (e *BudgetError) Is(target error) bool { return target == ErrTooLarge }

// Load checks the archive against the budget and only then loads it with Helm's loader.
// It has no context: it is the load of a process killed at its deadline (the render child).
func (b Budget) Load(archive []byte) (*chart.Chart, error) {
	ch, _, err := b.load(context.Background(), archive)
	var over *BudgetError
	if err != nil && !errors.As(err, &over) {
		return nil, fmt.Errorf("%w: %v", ErrUnloadable, err)
	}
	return ch, err
}

// check unpacks the archive once until ctx ends, checking every file and nested archive
// Helm's loader would unpack against the budget (one that does not unpack is refused, as
// Helm would), and keeps the archive's own files for the loader.
func (b Budget) check(ctx context.Context, archive []byte) (*budgetScan, error) {
	s := &budgetScan{b: b.withDefaults(), ctx: ctx}
	return s, s.archive(bytes.NewReader(archive), 0)
}

// load is Load with the loader's errors (and the scan's, but the budget's) as they are,
// and what the archive was charged; it stops between its steps once ctx ends.
func (b Budget) load(ctx context.Context, archive []byte) (*chart.Chart, charged, error) {
	s, err := b.check(ctx, archive)
	if err != nil {
		return nil, s.charged, err
	}
	if len(s.loaderFiles) == 0 {
		return nil, s.charged, errors.New("no files in chart archive")
	}
	ch, err := loader.LoadFiles(s.loaderFiles)
	if err != nil {
		return nil, s.charged, err
	}
	c := s.charged
	if err := s.b.chargeImports(ch, &c); err != nil {
		return ch, c, err
	}
	if err := s.b.chargeAliases(ctx, ch, &c); err != nil {
		return ch, c, err
	}
	return ch, c, chargeCopies(ch, c)
}

// charged is what an archive costs against a budget, aliases written out: every file's
// size and name, the YAML nodes the loader parses (and its import-values add), those of
// crds/, the subschemas, and Helm's dependency matching (entriesOf).
type charged struct {
	bytes, nodes, crdNodes, schemaNodes, matching int64
	files                                         int
}

// memory bounds what a loaded chart holds: its files and its parsed YAML.
func (c charged) memory() int64 { return c.bytes + c.nodes*bounds.ParsedNodeBytes }

// budgetScan holds one gzip window per nesting level and, past the chart's own archive,
// at most one file: a YAML file the loader parses, whose nodes it counts and whose aliases
// it measures. The files of the chart's own archive are kept for Helm's loader.
type budgetScan struct {
	b   Budget
	ctx context.Context
	charged
	loaderFiles []*loader.BufferedFile
	// kept are the bytes of loaderFiles, against Helm's own bound of an archive.
	kept int64
}

func (s *budgetScan) archive(r io.Reader, depth int) error {
	if depth > s.b.MaxDepth {
		return &BudgetError{Bound: fmt.Sprintf("nests archives more than %d deep", s.b.MaxDepth)}
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	for {
		if err := s.ctx.Err(); err != nil {
			return fmt.Errorf("check the chart: %w", err)
		}
		hd, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		// What Helm's LoadArchiveFiles skips; a directory's size is never read.
		if hd.FileInfo().IsDir() || hd.Typeflag == tar.TypeXGlobalHeader || hd.Typeflag == tar.TypeXHeader {
			continue
		}
		if err := s.count(hd); err != nil {
			return err
		}
		if err := s.file(tr, hd, depth); err != nil {
			return err
		}
		// The rest of the entry is skipped by Next: at most the size just counted.
	}
}

// file checks one file of an archive at depth; one of the chart's own archive is read
// whole and kept, as Helm's LoadArchiveFiles reads it, deeper only what is measured.
func (s *budgetScan) file(r io.Reader, hd *tar.Header, depth int) error {
	n, nameErr := loaderName(hd.Name)
	schema := path.Base(n) == "values.schema.json"
	var data []byte
	var err error
	switch {
	case depth == 0:
		data, err = s.keep(r, hd, n, nameErr)
	case parsedAsYAML(n) || isCRDFile(n) || schema:
		data, err = readWhole(r, hd, n)
	}
	if err != nil {
		return err
	}
	if isSubchartArchive(n) {
		if data != nil {
			r = bytes.NewReader(data)
		}
		if err := s.archive(r, depth+1); err != nil {
			return err
		}
	}
	if parsedAsYAML(n) {
		if err := s.parsed(data, &s.nodes, s.b.MaxNodes, "in the files Helm's loader parses"); err != nil {
			return err
		}
	}
	if isCRDFile(n) {
		if err := s.parsed(data, &s.crdNodes, s.b.MaxCRDNodes, "in its crds/ files"); err != nil {
			return err
		}
	}
	if schema {
		return s.schema(data)
	}
	return nil
}

// keep reads a file of the chart's own archive for Helm's loader (loader.LoadFiles), with
// the checks of Helm's LoadArchiveFiles: its name (nameErr), Helm's bounds of a file and
// of the archive, a leading byte order mark dropped.
func (s *budgetScan) keep(r io.Reader, hd *tar.Header, n string, nameErr error) ([]byte, error) {
	if nameErr != nil {
		return nil, nameErr
	}
	if s.kept += hd.Size; s.kept > loader.MaxDecompressedChartSize {
		return nil, fmt.Errorf("decompressed chart is larger than the maximum file size %d", loader.MaxDecompressedChartSize)
	}
	data, err := readWhole(r, hd, n)
	if err != nil {
		return nil, err
	}
	s.loaderFiles = append(s.loaderFiles, &loader.BufferedFile{Name: n, Data: bytes.TrimPrefix(data, utf8BOM)})
	return data, nil
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// count charges a file the size its header declares (the tar reader yields no more).
func (s *budgetScan) count(hd *tar.Header) error {
	if hd.Size < 0 {
		return fmt.Errorf("%q has a negative size", hd.Name)
	}
	s.files++
	if s.files > s.b.MaxFiles {
		return &BudgetError{Bound: fmt.Sprintf("holds more than %d files across its nested archives", s.b.MaxFiles)}
	}
	s.bytes += int64(len(hd.Name)) + hd.Size
	if s.bytes > s.b.MaxBytes {
		return &BudgetError{Bound: fmt.Sprintf("unpacks to more than %s across its nested archives", mib(s.b.MaxBytes))}
	}
	return nil
}

// loaderYAML are the files Helm's loader parses, in a chart and every subchart; templates
// are parsed only when rendered.
var loaderYAML = map[string]bool{"Chart.yaml": true, "Chart.lock": true, "values.yaml": true,
	"requirements.yaml": true, "requirements.lock": true}

func parsedAsYAML(n string) bool { return loaderYAML[path.Base(n)] }

// isCRDFile: Helm's install parses the file as a CRD (chart.CRDObjects): under crds/ of the
// chart or of a directory subchart, with a manifest extension.
func isCRDFile(n string) bool {
	parts := strings.Split(n, "/")
	i := 0
	for i+2 < len(parts) && parts[i] == "charts" {
		i += 2
	}
	switch strings.ToLower(path.Ext(n)) {
	case ".yaml", ".yml", ".json":
		return i+1 < len(parts) && parts[i] == "crds"
	}
	return false
}

// parsed charges a YAML file Helm parses (the loader's, or a crds/ file) its nodes against
// *total up to max, and what its aliases add once written out: the parser expands them, so
// a few KiB could otherwise parse into gigabytes (pkg/yamlsize).
func (s *budgetScan) parsed(data []byte, total *int64, max int64, where string) error {
	own := int64(len(data))
	expanded, err := yamlsize.Expanded(data, s.b.MaxBytes-s.bytes+own)
	if err != nil { // always yamlsize.ErrTooLarge
		return &BudgetError{Bound: fmt.Sprintf("unpacks to more than %s across its nested archives once its YAML aliases are written out", mib(s.b.MaxBytes))}
	}
	if expanded.Bytes > own {
		s.bytes += expanded.Bytes - own
	}
	if *total += expanded.Nodes; *total > max {
		return &BudgetError{Bound: fmt.Sprintf("has more than %d YAML nodes %s", max, where)}
	}
	return nil
}

// schema charges a values.schema.json its subschemas (its size is counted already).
func (s *budgetScan) schema(data []byte) error {
	if s.schemaNodes += SchemaNodes(data); s.schemaNodes > s.b.MaxSchemaNodes {
		return &BudgetError{Bound: fmt.Sprintf("has more than %d subschemas in its values.schema.json files", s.b.MaxSchemaNodes)}
	}
	if longestString(data) > bounds.MaxSchemaString {
		return &BudgetError{Bound: fmt.Sprintf("has a string of more than %d bytes in a values.schema.json", bounds.MaxSchemaString)}
	}
	return nil
}

// readWhole reads file n whole; one over Helm's own per-file cap is refused before it is
// read (the loader would refuse it), in Helm's words for a file the scan does not measure.
func readWhole(r io.Reader, hd *tar.Header, n string) ([]byte, error) {
	if hd.Size > loader.MaxDecompressedFileSize {
		what := "YAML file"
		switch {
		case path.Base(n) == "values.schema.json":
			what = "values.schema.json"
		case !parsedAsYAML(n) && !isCRDFile(n):
			return nil, fmt.Errorf("decompressed chart file %q is larger than the maximum file size %d", hd.Name, loader.MaxDecompressedFileSize)
		}
		return nil, &BudgetError{Bound: fmt.Sprintf("has a %s over Helm's %s", what, mib(loader.MaxDecompressedFileSize))}
	}
	data := make([]byte, hd.Size)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return data, nil
}

// longestString bounds the longest JSON string in data (escapes included).
func longestString(data []byte) int {
	longest, start, in, escaped := 0, 0, false, false
	for i, c := range data {
		switch {
		case !in:
			if c == '"' {
				in, start = true, i+1
			}
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			in = false
			longest = max(longest, i-start)
		}
	}
	if in {
		longest = max(longest, len(data)-start)
	}
	return longest
}

// SchemaNodes bounds the subschemas of a JSON schema from its bytes: each is an object
// ("{") or a boolean in a list or a map (after ",", or the first, after "[" or ":").
func SchemaNodes(data []byte) int64 {
	n := int64(1)
	for _, c := range data {
		switch c {
		case '{', ',', '[', ':':
			n++
		}
	}
	return n
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// drivePath is a name Helm's LoadArchiveFiles refuses (c:/...).
var drivePath = regexp.MustCompile(`^[a-zA-Z]:/`)

// loaderName is the name Helm's LoadArchiveFiles gives an entry: without its first element,
// "\" as "/" in archives made on Windows, cleaned; and the error it gives a name it refuses.
func loaderName(name string) (string, error) {
	delimiter := "/"
	if strings.ContainsRune(name, '\\') {
		delimiter = "\\"
	}
	parts := strings.Split(name, delimiter)
	raw := strings.ReplaceAll(strings.Join(parts[1:], delimiter), delimiter, "/")
	n := path.Clean(raw)
	switch {
	case path.IsAbs(raw):
		return n, errors.New("chart illegally contains absolute paths")
	case n == ".":
		return n, fmt.Errorf("chart illegally contains content outside the base directory: %q", name)
	case strings.HasPrefix(n, ".."):
		return n, errors.New("chart illegally references parent directory")
	case drivePath.MatchString(n):
		return n, errors.New("chart contains illegally named files")
	case parts[0] == "Chart.yaml":
		return n, errors.New("chart yaml not in base directory")
	}
	return n, nil
}

// isSubchartArchive: Helm's LoadFiles unpacks the file as a subchart: charts/<x>.tgz, also
// in directory subcharts (charts/<d>/charts/<x>.tgz), no <d> or <x> starting "_" or ".".
func isSubchartArchive(n string) bool {
	parts := strings.Split(n, "/")
	if len(parts) < 2 || len(parts)%2 != 0 {
		return false
	}
	for i := 0; i < len(parts); i += 2 {
		name := parts[i+1]
		if parts[i] != "charts" || name == "" || strings.IndexAny(name, "_.") == 0 {
			return false
		}
	}
	return path.Ext(parts[len(parts)-1]) == ".tgz"
}
