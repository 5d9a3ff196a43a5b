package chartrepos

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/async-helm/async-helm/pkg/chartref"
	"github.com/async-helm/async-helm/pkg/chartsource"
)

// CredentialSecrets names the Secrets of namespace whose contents a fetch would send: those
// named (basicAuthConfig, tlsClientConfig) by the namespace's enabled project repositories
// that an index entry names or a chart URL is under. Only the repository objects are read,
// never the Secrets: submit asks whether the caller may get each before anything is
// fetched (submitter.RepoSecrets).
//
// An index entry whose repository the namespace does not see (yet) is an error: the
// repository could appear between this check and the fetch (a tenant creates it while
// installing), and would then be used unchecked.
func (s *Set) CredentialSecrets(namespace, indexEntry, chartURL string) ([]string, error) {
	repoName := ""
	if indexEntry != "" {
		if _, r, err := chartref.SplitIndexEntry(indexEntry); err == nil {
			repoName = r
		}
		if !s.sees(namespace, repoName) {
			return nil, fmt.Errorf("%w: no chart repository %q is configured", chartsource.ErrNotFound, repoName)
		}
	}
	if s.project == nil || namespace == "" {
		return nil, nil
	}
	objs, err := s.project.ByNamespace(namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ProjectHelmChartRepositories of %s: %w", namespace, err)
	}
	seen := map[string]bool{}
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if off, _, _ := unstructured.NestedBool(u.Object, "spec", "disabled"); off {
			continue
		}
		url, _, _ := unstructured.NestedString(u.Object, "spec", "connectionConfig", "url")
		under := chartURL != "" && url != "" && strings.HasPrefix(chartURL, strings.TrimSuffix(url, "/")+"/")
		if u.GetName() != repoName && !under {
			continue
		}
		for _, field := range []string{"basicAuthConfig", "tlsClientConfig"} {
			if name, _, _ := unstructured.NestedString(u.Object, "spec", "connectionConfig", field, "name"); name != "" {
				seen[name] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// sees says whether namespace sees a repository named name (the one of the three that
// resolution would pick is enabled), from the objects only: no credential is read.
func (s *Set) sees(namespace, name string) bool {
	if namespace != "" && s.project != nil {
		if o, err := s.project.ByNamespace(namespace).Get(name); err == nil {
			return enabled(o)
		}
	}
	if s.cluster != nil {
		if o, err := s.cluster.Get(name); err == nil {
			return enabled(o)
		}
	}
	_, ok := s.Env[name]
	return ok
}

func enabled(o runtime.Object) bool {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	off, _, _ := unstructured.NestedBool(u.Object, "spec", "disabled")
	return !off
}
