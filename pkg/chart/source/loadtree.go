package source

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// loadTree is Helm's loader.LoadFiles with each chart of the tree parsed by LoadFiles on its
// own, a chart's own files or a subchart on a goroutine of its own while one of GOMAXPROCS-1
// is free, inline otherwise: the YAML of a tree's charts is most of a cold load (GitLab has
// 22), and they parse independently. It parses only files the budget's scan has checked.
func loadTree(files []*loader.BufferedFile) (*chart.Chart, error) {
	return treeLoader(make(chan struct{}, runtime.GOMAXPROCS(0)-1)).load(files)
}

type treeLoader chan struct{}

// load is LoadFiles: the chart's own files (a charts/*.prov one included) by LoadFiles,
// beside its subcharts, added by name (Helm adds them in a map's order).
func (t treeLoader) load(files []*loader.BufferedFile) (*chart.Chart, error) {
	var own []*loader.BufferedFile
	subs := map[string][]*loader.BufferedFile{}
	for _, f := range files {
		rest, ok := strings.CutPrefix(f.Name, "charts/")
		if !ok || filepath.Ext(f.Name) == ".prov" {
			own = append(own, f)
			continue
		}
		name, _, _ := strings.Cut(rest, "/")
		subs[name] = append(subs[name], &loader.BufferedFile{Name: rest, Data: f.Data})
	}
	names := slices.Sorted(maps.Keys(subs))
	deps, errs := make([]*chart.Chart, len(names)), make([]error, len(names))
	var wg sync.WaitGroup
	run := func(job func()) {
		select {
		case t <- struct{}{}:
			wg.Go(func() { job(); <-t })
		default:
			job()
		}
	}
	var c *chart.Chart
	var err error
	run(func() { c, err = loader.LoadFiles(own) }) // first: GitLab's own values are its largest
	for i, n := range names {
		run(func() { deps[i], errs[i] = t.subchart(n, subs[n]) })
	}
	wg.Wait()
	if err != nil {
		return c, err
	}
	c.Raw = c.Raw[:0]
	for _, f := range files {
		c.Raw = append(c.Raw, &chart.File{Name: f.Name, Data: f.Data})
	}
	for i, n := range names {
		switch {
		case errs[i] == errTarDirectory:
			return c, fmt.Errorf("error unpacking subchart tar in %s: expected %s, got %s", c.Name(), n, subs[n][0].Name)
		case errs[i] != nil:
			return c, fmt.Errorf("error unpacking subchart %s in %s: %w", n, c.Name(), errs[i])
		case deps[i] != nil:
			c.AddDependency(deps[i])
		}
	}
	return c, nil
}

// errTarDirectory is a charts/<n>.tgz that is a directory, refused in Helm's words by load.
var errTarDirectory = errors.New("a subchart archive's name is a directory")

// subchart loads charts/<n> as LoadFiles does: nothing when n starts with _ or ., an
// archive unpacked, a directory's files.
func (t treeLoader) subchart(n string, files []*loader.BufferedFile) (*chart.Chart, error) {
	switch {
	case strings.IndexAny(n, "_.") == 0:
		return nil, nil
	case filepath.Ext(n) != ".tgz":
		own := make([]*loader.BufferedFile, 0, len(files))
		for _, f := range files {
			if _, rest, ok := strings.Cut(f.Name, "/"); ok {
				own = append(own, &loader.BufferedFile{Name: rest, Data: f.Data})
			}
		}
		return t.load(own)
	case files[0].Name != n:
		return nil, errTarDirectory
	}
	unpacked, err := loader.LoadArchiveFiles(bytes.NewReader(files[0].Data))
	if err != nil {
		return nil, err
	}
	return t.load(unpacked)
}
