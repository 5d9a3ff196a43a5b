package chartrepos

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/async-helm/async-helm/pkg/chartref"
)

// CredentialSecrets names the Secrets of namespace whose contents a fetch would send: those
// named (basicAuthConfig, tlsClientConfig) by the namespace's enabled project repositories
// that an index entry names or a chart URL is under. Only the repository objects are read,
// never the Secrets: submit asks whether the caller may get each before anything is
// fetched (submitter.RepoSecrets).
func (s *Set) CredentialSecrets(namespace, indexEntry, chartURL string) []string {
	if s.project == nil || namespace == "" {
		return nil
	}
	repoName := ""
	if indexEntry != "" {
		if _, r, err := chartref.SplitIndexEntry(indexEntry); err == nil {
			repoName = r
		}
	}
	objs, err := s.project.ByNamespace(namespace).List(labels.Everything())
	if err != nil {
		return nil
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
	return out
}
