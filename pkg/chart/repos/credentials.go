package repos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/lru"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/kube"
)

// CredentialSecrets names the Secrets of namespace that the enabled project repositories an
// index entry names or a chart URL is under would send, from the objects only: submit asks
// whether the caller may get each before any fetch. An index entry whose repository is not
// seen (yet) is an error: it could appear before the fetch and be used unchecked.
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

// sees says whether the repository namespace resolves name to is enabled (objects only).
func (s *Set) sees(namespace, name string) bool {
	if o := s.projectObject(namespace, name); o != nil {
		return enabled(o)
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

// CallerChecked are the repositories of a Set whose project credentials are sent only for a
// caller who may read them (chartsource.CredentialChecker): the executor fetches long after
// submit's review, and a tenant can create a repository under a queued chart URL between.
// The administrators' credentials are sent as configured.
type CallerChecked struct {
	*Set
	// AsCaller is a client acting as the caller (Impersonating).
	AsCaller func(chartsource.Caller) (kubernetes.Interface, error)
}

// Impersonating builds clients that act as the caller (an empty one: cfg's own identity).
func Impersonating(cfg *rest.Config) func(chartsource.Caller) (kubernetes.Interface, error) {
	return func(c chartsource.Caller) (kubernetes.Interface, error) {
		return kube.Impersonating(cfg, rest.ImpersonationConfig{UserName: c.User, UID: c.UID, Groups: c.Groups, Extra: c.Extra})
	}
}

// CheckCredentials lets r's credentials go only if they are what the caller in ctx reads
// now from the Secrets r's project repository names, or an administrator's repository's
// own: values, not names, are compared (the object may change after it was resolved).
func (c CallerChecked) CheckCredentials(ctx context.Context, namespace string, r chartsource.Repository) error {
	if r.Username == "" && len(r.CertPEM) == 0 {
		return nil
	}
	obj := c.projectObject(namespace, r.Name)
	if obj == nil {
		return c.checkAdmin(ctx, namespace, r)
	}
	caller, ok := chartsource.CallerFrom(ctx)
	if !ok {
		return fmt.Errorf("%w: chart repository %q of %s: no caller to read its Secrets as", chartsource.ErrCredentialsRefused, r.Name, namespace)
	}
	client, err := c.AsCaller(caller)
	if err != nil {
		return fmt.Errorf("%w: chart repository %q of %s: %w", chartsource.ErrCredentialsRefused, r.Name, namespace, err)
	}
	read := func(field string) (map[string][]byte, error) {
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "connectionConfig", field, "name")
		if name == "" {
			return nil, fmt.Errorf("%w: chart repository %q of %s names no %s any more", chartsource.ErrCredentialsRefused, r.Name, namespace, field)
		}
		sec, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("%w: caller %q may not read Secret %s/%s (the %s of chart repository %q); nothing was sent: %w",
				chartsource.ErrCredentialsRefused, caller.User, namespace, name, field, r.Name, err)
		}
		return sec.Data, nil
	}
	if r.Username != "" {
		d, err := read("basicAuthConfig")
		if err != nil {
			return err
		}
		if string(d[KeyUsername]) != r.Username || string(d[KeyPassword]) != r.Password {
			return fmt.Errorf("%w: the basic auth of chart repository %q of %s changed while fetching; retry", chartsource.ErrCredentialsRefused, r.Name, namespace)
		}
	}
	if len(r.CertPEM) > 0 {
		d, err := read("tlsClientConfig")
		if err != nil {
			return err
		}
		if !bytes.Equal(d[KeyTLSCert], r.CertPEM) || !bytes.Equal(d[KeyTLSKey], r.KeyPEM) {
			return fmt.Errorf("%w: the TLS client certificate of chart repository %q of %s changed while fetching; retry", chartsource.ErrCredentialsRefused, r.Name, namespace)
		}
	}
	return nil
}

// projectObject is the namespace's project repository named name, if any (it hides a
// cluster one).
func (s *Set) projectObject(namespace, name string) *unstructured.Unstructured {
	if namespace == "" || s.project == nil {
		return nil
	}
	o, err := s.project.ByNamespace(namespace).Get(name)
	if err != nil {
		return nil
	}
	u, _ := o.(*unstructured.Unstructured)
	return u
}

// checkAdmin lets credentials go that are an administrator's repository's own (same name,
// URL and credentials).
func (c CallerChecked) checkAdmin(ctx context.Context, namespace string, r chartsource.Repository) error {
	byName := map[string]Repo{}
	for _, a := range append(c.envRepos(), c.clusterRepos(ctx)...) {
		byName[a.Name] = a // a cluster repository hides one of CHART_REPOSITORIES
	}
	a, ok := byName[r.Name]
	if ok && a.URL == r.URL && a.Username == r.Username && a.Password == r.Password &&
		bytes.Equal(a.CertPEM, r.CertPEM) && bytes.Equal(a.KeyPEM, r.KeyPEM) {
		return nil
	}
	return fmt.Errorf("%w: chart repository %q of %s is not configured as it was resolved; nothing was sent",
		chartsource.ErrCredentialsRefused, r.Name, namespace)
}

// parse reads one repository object and its credentials; an unusable one keeps its name with
// Err set (listed as invalid, its installs fail saying why).
func (s *Set) parse(ctx context.Context, u *unstructured.Unstructured, scope Scope) Repo {
	r := Repo{Scope: scope, Repository: chartsource.Repository{Name: u.GetName()}}
	if scope == ScopeProject {
		r.Namespace = u.GetNamespace()
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if reason, _, _ := unstructured.NestedString(spec, "refused"); reason != "" {
		r.Err = errors.New(reason)
		return r
	}
	r.Disabled, _, _ = unstructured.NestedBool(spec, "disabled")
	r.DisplayName, _, _ = unstructured.NestedString(spec, "name")
	r.Description, _, _ = unstructured.NestedString(spec, "description")
	r.URL, _, _ = unstructured.NestedString(spec, "connectionConfig", "url")
	if r.URL == "" {
		r.Err = errors.New("spec.connectionConfig.url is empty")
		return r
	}
	credsNS := ConfigNamespace
	if scope == ScopeProject {
		credsNS = r.Namespace
	}
	if name, _, _ := unstructured.NestedString(spec, "connectionConfig", "ca", "name"); name != "" {
		if r.CA, r.Err = s.objectKey(ctx, "configmap", credsNS, name, KeyCABundle); r.Err != nil {
			return r
		}
	}
	if name, _, _ := unstructured.NestedString(spec, "connectionConfig", "tlsClientConfig", "name"); name != "" {
		if r.CertPEM, r.Err = s.objectKey(ctx, "secret", credsNS, name, KeyTLSCert); r.Err != nil {
			return r
		}
		if r.KeyPEM, r.Err = s.objectKey(ctx, "secret", credsNS, name, KeyTLSKey); r.Err != nil {
			return r
		}
	}
	// basicAuthConfig is a field of project repositories only (openshift/api).
	if name, _, _ := unstructured.NestedString(spec, "connectionConfig", "basicAuthConfig", "name"); name != "" && scope == ScopeProject {
		if len(r.URL) < 8 || r.URL[:8] != "https://" {
			r.Err = errors.New("basic authentication requires an https repository URL")
			return r
		}
		var user, pass []byte
		if user, r.Err = s.objectKey(ctx, "secret", credsNS, name, KeyUsername); r.Err != nil {
			return r
		}
		if pass, r.Err = s.objectKey(ctx, "secret", credsNS, name, KeyPassword); r.Err != nil {
			return r
		}
		r.Username, r.Password = string(user), string(pass)
	}
	return r
}

// objectKey reads key of the "configmap" or "secret" ns/name, through the cache.
func (s *Set) objectKey(ctx context.Context, kind, ns, name, key string) ([]byte, error) {
	return s.cached(ctx, kind, ns, name, key, func() ([]byte, bool, error) {
		if kind == "configmap" {
			cm, err := s.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, false, err
			}
			v, ok := cm.Data[key]
			return []byte(v), ok, nil
		}
		sec, err := s.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, false, err
		}
		v, ok := sec.Data[key]
		return v, ok, nil
	})
}

// cached reads one key of a ConfigMap or Secret, reusing what was read within a minute; a
// failed read is retried after 5 s: a Secret often comes just after its repository.
func (s *Set) cached(ctx context.Context, kind, ns, name, key string, read func() ([]byte, bool, error)) ([]byte, error) {
	ck := kind + "/" + name + "/" + key
	ttl := time.Minute
	e, ok := s.creds.get(ns, ck)
	if ok && e.err != nil {
		ttl = 5 * time.Second
	}
	if ok && s.now().Sub(e.at) < ttl {
		return e.value, e.err
	}
	v, found, err := read()
	switch {
	case err != nil:
		err = fmt.Errorf("%s %s/%s: %w", kind, ns, name, err)
	case !found:
		err = fmt.Errorf("%s %s/%s has no key %q", kind, ns, name, key)
	}
	s.creds.put(ns, ck, credsEntry{value: v, err: err, at: s.now()})
	return v, err
}

// ReviewedAuthSecrets read a chart's basic auth Secret with submit's rights once the caller
// in the context may get it (MayGet, an access review; nil: authentication off).
type ReviewedAuthSecrets struct {
	Client kubernetes.Interface
	MayGet func(ctx context.Context, c chartsource.Caller, namespace, name string) error
}

// ReadAuthSecret implements chartsource.AuthSecretReader.
func (r ReviewedAuthSecrets) ReadAuthSecret(ctx context.Context, namespace, name string) (chartsource.Credentials, error) {
	caller, ok := chartsource.CallerFrom(ctx)
	if !ok {
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s: no caller to read it for", chartsource.ErrCredentialsRefused, namespace, name)
	}
	if caller.User != "" && r.MayGet != nil {
		if err := r.MayGet(ctx, caller, namespace, name); err != nil {
			return chartsource.Credentials{}, fmt.Errorf("basic auth Secret %s/%s; nothing was fetched with it: %w", namespace, name, err)
		}
	}
	return readAuthSecret(ctx, r.Client, namespace, name)
}

// ReadAuthSecret reads a chart's basic auth Secret impersonating the caller in the context
// (the executor, long after submit's review).
func (c CallerChecked) ReadAuthSecret(ctx context.Context, namespace, name string) (chartsource.Credentials, error) {
	caller, ok := chartsource.CallerFrom(ctx)
	if !ok {
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s: no caller to read it as", chartsource.ErrCredentialsRefused, namespace, name)
	}
	client, err := c.AsCaller(caller)
	if err != nil {
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s: %w", chartsource.ErrCredentialsRefused, namespace, name, err)
	}
	creds, err := readAuthSecret(ctx, client, namespace, name)
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return creds, fmt.Errorf("%w: caller %q may not read basic auth Secret %s/%s; nothing was fetched with it: %w",
			chartsource.ErrCredentialsRefused, caller.User, namespace, name, err)
	}
	return creds, err
}

// readAuthSecret reads the keys username and password of a Secret with client.
func readAuthSecret(ctx context.Context, client kubernetes.Interface, namespace, name string) (chartsource.Credentials, error) {
	sec, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s not found", chartsource.ErrAuthSecret, namespace, name)
	case err != nil:
		return chartsource.Credentials{}, fmt.Errorf("read basic auth Secret %s/%s: %w", namespace, name, err)
	}
	return basicAuth(namespace, name, sec.Data)
}

// basicAuth reads the keys username and password of a basic auth Secret.
func basicAuth(namespace, name string, data map[string][]byte) (chartsource.Credentials, error) {
	u, uok := data[KeyUsername]
	p, pok := data[KeyPassword]
	if !uok || !pok || len(u) == 0 {
		return chartsource.Credentials{}, fmt.Errorf("%w: Secret %s/%s needs the keys %q and %q", chartsource.ErrAuthSecret, namespace, name,
			KeyUsername, KeyPassword)
	}
	return chartsource.Credentials{Username: string(u), Password: string(p)}, nil
}

// NewSource builds settings' chart source with the credentials of CHART_REPOSITORY_SECRETS.
func NewSource(ctx context.Context, settings chartsource.Settings, client kubernetes.Interface, ttl, timeout time.Duration) (*chartsource.Source, error) {
	creds, err := LoadCredentials(ctx, client, settings.ChartSecretsNamespace, settings.ChartRepositorySecrets)
	if err != nil {
		return nil, err
	}
	return settings.NewSource(creds, ttl, timeout)
}

// LoadCredentials reads the Secret (keys username, password, ca.crt) secrets names in
// namespace for each repository of CHART_REPOSITORIES.
func LoadCredentials(ctx context.Context, client kubernetes.Interface, namespace string, secrets map[string]string) (map[string]chartsource.Credentials, error) {
	out := map[string]chartsource.Credentials{}
	for repo, name := range secrets {
		s, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("credentials of chart repository %q (secret %s/%s): %w", repo, namespace, name, err)
		}
		out[repo] = chartsource.Credentials{Username: string(s.Data[KeyUsername]), Password: string(s.Data[KeyPassword]), CA: s.Data[KeyEnvCA]}
	}
	return out, nil
}

// The credentials cache's bounds: the CA bundles, certificates and passwords read from one
// namespace, and from all. A ConfigMap holds at most 1 MiB, so any one value fits.
const (
	credsPerNamespace = 4 << 20
	credsTotal        = 32 << 20
	// credsKeysPerNamespace and credsNamespaces bound the entries of empty values.
	credsKeysPerNamespace = 256
	credsNamespaces       = 1024
)

type credsEntry struct {
	value []byte
	err   error
	at    time.Time
}

// credsCache keeps what was read of the ConfigMaps and Secrets repositories name, least
// recently used out first: a namespace's past perNamespace bytes, whole namespaces past total.
type credsCache struct {
	perNamespace, total int64

	mu    sync.Mutex
	byNS  *lru.Cache // namespace -> *nsCreds
	bytes int64
}

type nsCreds struct {
	keys  *lru.Cache // kind/name/key -> credsEntry
	bytes int64
}

func newCredsCache(perNamespace, total int64) *credsCache {
	c := &credsCache{perNamespace: perNamespace, total: total}
	c.byNS = lru.NewWithEvictionFunc(credsNamespaces, func(_ lru.Key, v any) { c.bytes -= v.(*nsCreds).bytes })
	return c
}

func (c *credsCache) get(namespace, key string) (credsEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.byNS.Get(namespace)
	if !ok {
		return credsEntry{}, false
	}
	e, ok := n.(*nsCreds).keys.Get(key)
	if !ok {
		return credsEntry{}, false
	}
	return e.(credsEntry), true
}

// put keeps e as key's entry of namespace within the bounds.
func (c *credsCache) put(namespace, key string, e credsEntry) {
	size := int64(len(key) + len(e.value))
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.namespace(namespace)
	n.keys.Remove(key)
	if size > c.perNamespace {
		return
	}
	for n.bytes+size > c.perNamespace && n.keys.Len() > 0 {
		n.keys.RemoveOldest()
	}
	n.keys.Add(key, e)
	n.bytes += size
	c.bytes += size
	for c.bytes > c.total && c.byNS.Len() > 1 {
		c.byNS.RemoveOldest()
	}
}

// namespace is namespace's entries, made if need be, marked used.
func (c *credsCache) namespace(namespace string) *nsCreds {
	if n, ok := c.byNS.Get(namespace); ok {
		return n.(*nsCreds)
	}
	n := &nsCreds{}
	n.keys = lru.NewWithEvictionFunc(credsKeysPerNamespace, func(k lru.Key, v any) {
		size := int64(len(k.(string)) + len(v.(credsEntry).value))
		n.bytes -= size
		c.bytes -= size
	})
	c.byNS.Add(namespace, n)
	return n
}
