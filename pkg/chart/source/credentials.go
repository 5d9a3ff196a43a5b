package source

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Credentials of one chart repository: basic auth, the CA its server certificate is
// checked with (PEM; the system roots when empty), and a TLS client certificate (PEM).
type Credentials struct {
	Username, Password string
	CA                 []byte
	CertPEM, KeyPEM    []byte
}

// LoadCredentials reads the Secret of each repository: secrets maps a repository name to the
// name of a Secret in namespace.
func LoadCredentials(ctx context.Context, client kubernetes.Interface, namespace string, secrets map[string]string) (map[string]Credentials, error) {
	out := map[string]Credentials{}
	for repo, name := range secrets {
		s, err := client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("credentials of chart repository %q (secret %s/%s): %w", repo, namespace, name, err)
		}
		out[repo] = Credentials{Username: string(s.Data[AuthSecretUsername]), Password: string(s.Data[AuthSecretPassword]), CA: s.Data["ca.crt"]}
	}
	return out, nil
}

// ErrCredentialsRefused means a repository's credentials were not sent: the caller a fetch
// is for may not read the Secrets they come from (or they changed while fetching).
var ErrCredentialsRefused = errors.New("chart repository credentials refused")

// Caller is who a fetch is for: the identity the executor impersonates (events.Caller).
// An empty User is a trusted local run: the executor acts as itself.
type Caller struct {
	User, UID string
	Groups    []string
	Extra     map[string][]string
}

type callerKey struct{}

// WithCaller carries the caller of a fetch to a CredentialChecker: the Charts port takes
// only a context and a reference, and the caller must travel with the action.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom is the caller WithCaller put into ctx; ok is false when there is none.
func CallerFrom(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}

func (s *Source) client() *http.Client {
	if s.HTTP != nil {
		return s.HTTP
	}
	return &http.Client{Timeout: time.Minute}
}

// Settings are the chart settings of every function that fetches charts, read from its
// environment (embed it in the function's env struct).
type Settings struct {
	// ChartRepositories lists the repositories of index entries: "name=url,name=url".
	ChartRepositories string `envconfig:"CHART_REPOSITORIES"`
	// ChartRepositorySecrets names the Secret of a repository's credentials: "name:secret,...".
	ChartRepositorySecrets map[string]string `envconfig:"CHART_REPOSITORY_SECRETS"`
	ChartSecretsNamespace  string            `envconfig:"CHART_SECRETS_NAMESPACE" default:"async-helm"`
	// Chart hosts on loopback or private addresses are refused unless allowed;
	// AllowChartAddresses are ip:port hosts allowed whatever their range.
	AllowLoopbackCharts bool     `envconfig:"ALLOW_LOOPBACK_CHARTS"`
	AllowPrivateCharts  bool     `envconfig:"ALLOW_PRIVATE_CHARTS"`
	AllowChartAddresses []string `envconfig:"ALLOW_CHART_ADDRESSES"`
	// PlainHTTPRegistries are OCI registries (host:port) without TLS, as helm's --plain-http.
	PlainHTTPRegistries []string `envconfig:"CHART_PLAIN_HTTP_REGISTRIES"`
	// ChartCacheMiB bounds the memory of the chart cache (archives and parsed charts),
	// least recently used first out.
	ChartCacheMiB int64 `envconfig:"CHART_CACHE_MIB" default:"128"`
	// ChartIndexRefresh is how often the indexes of the chart repositories are fetched
	// again in the background (a change of a repository object refreshes at once).
	ChartIndexRefresh time.Duration `envconfig:"CHART_INDEX_REFRESH" default:"5m"`
	// The budget of what one chart unpacks to across its nested archives (Budget).
	ChartMaxUnpackedMiB int64 `envconfig:"CHART_MAX_UNPACKED_MIB" default:"64"`
	ChartMaxFiles       int   `envconfig:"CHART_MAX_FILES" default:"10000"`
	ChartMaxDepth       int   `envconfig:"CHART_MAX_DEPTH" default:"5"`
	ChartMaxYAMLNodes   int64 `envconfig:"CHART_MAX_YAML_NODES" default:"100000"`
	// ChartMaxParallelLoads bounds the charts checked and loaded at once (Source.MaxParallelLoads).
	ChartMaxParallelLoads int `envconfig:"CHART_MAX_PARALLEL_LOADS" default:"2"`
	RouteSettings
}

// RouteSettings bound submit's chart and template routes, which any valid token may call.
type RouteSettings struct {
	// ChartRoutesRate and ChartRoutesBurst are each caller's token bucket (CallerLimits).
	ChartRoutesRate  float64 `envconfig:"CHART_ROUTES_RATE" default:"2"`
	ChartRoutesBurst int     `envconfig:"CHART_ROUTES_BURST" default:"10"`
	// A render of the template route runs in a child process killed after
	// TemplateRenderTimeout, its data segment bounded by TemplateRenderMaxMiB, at most
	// TemplateRenderMaxParallel at once.
	TemplateRenderTimeout     time.Duration `envconfig:"TEMPLATE_RENDER_TIMEOUT" default:"10s"`
	TemplateRenderMaxMiB      int64         `envconfig:"TEMPLATE_RENDER_MAX_MIB" default:"256"`
	TemplateRenderMaxParallel int           `envconfig:"TEMPLATE_RENDER_MAX_PARALLEL" default:"2"`
}

// Limits are the per-caller limits of the chart routes.
func (c RouteSettings) Limits() *CallerLimits {
	rate, burst := c.ChartRoutesRate, c.ChartRoutesBurst
	if rate <= 0 && burst <= 0 { // unset (a Config built in code): the defaults
		rate, burst = 2, 10
	}
	return &CallerLimits{Rate: rate, Burst: burst}
}

// Budget is the unpack budget the settings give.
func (c Settings) Budget() (Budget, error) {
	if c.ChartMaxUnpackedMiB < 0 || c.ChartMaxFiles < 0 || c.ChartMaxDepth < 0 || c.ChartMaxYAMLNodes < 0 {
		return Budget{}, fmt.Errorf("CHART_MAX_UNPACKED_MIB, CHART_MAX_FILES, CHART_MAX_DEPTH and CHART_MAX_YAML_NODES are %d, %d, %d and %d, want positive bounds",
			c.ChartMaxUnpackedMiB, c.ChartMaxFiles, c.ChartMaxDepth, c.ChartMaxYAMLNodes)
	}
	return Budget{MaxBytes: c.ChartMaxUnpackedMiB << 20, MaxFiles: c.ChartMaxFiles, MaxDepth: c.ChartMaxDepth,
		MaxNodes: c.ChartMaxYAMLNodes}.withDefaults(), nil
}

// NewSource builds a chart source from the settings: repositories, their credentials, and
// the address policy every download goes through.
func (c Settings) NewSource(ctx context.Context, client kubernetes.Interface, ttl, timeout time.Duration) (*Source, error) {
	repos, err := ParseRepositories(c.ChartRepositories)
	if err != nil {
		return nil, err
	}
	creds, err := LoadCredentials(ctx, client, c.ChartSecretsNamespace, c.ChartRepositorySecrets)
	if err != nil {
		return nil, err
	}
	policy := Policy{AllowLoopback: c.AllowLoopbackCharts, AllowPrivate: c.AllowPrivateCharts, AllowAddresses: c.AllowChartAddresses}
	if c.ChartCacheMiB < 0 {
		return nil, fmt.Errorf("CHART_CACHE_MIB is %d, want a positive size", c.ChartCacheMiB)
	}
	budget, err := c.Budget()
	if err != nil {
		return nil, err
	}
	return &Source{Repositories: repos, Credentials: creds, TTL: ttl, HTTP: policy.HTTPClient(timeout),
		PlainHTTPRegistries: c.PlainHTTPRegistries, MaxCacheBytes: c.ChartCacheMiB << 20, Budget: budget,
		MaxParallelLoads: c.ChartMaxParallelLoads}, nil
}

// ErrAuthSecret is a basic auth Secret (Ref.AuthSecret) that is missing or lacks its keys:
// the request names something that cannot be used (400, as the console answers it).
var ErrAuthSecret = fmt.Errorf("%w: basic auth secret", ErrInvalidRef)

// Keys of a basic auth Secret, as the console reads them.
const (
	AuthSecretUsername = "username"
	AuthSecretPassword = "password"
)

// AuthSecretReader reads the basic auth Secret a reference names (Ref.AuthSecret) for the
// caller in ctx (CallerFrom) only: a caller who may not read it gets an error, and nothing
// is fetched with it. Submit reviews the caller's access and reads with its own rights;
// the executor reads impersonating the caller (package chartrepos).
type AuthSecretReader interface {
	ReadAuthSecret(ctx context.Context, namespace, name string) (Credentials, error)
}

// CredentialsFromSecret reads the keys username and password of a basic auth Secret.
func CredentialsFromSecret(namespace, name string, data map[string][]byte) (Credentials, error) {
	u, uok := data[AuthSecretUsername]
	p, pok := data[AuthSecretPassword]
	if !uok || !pok || len(u) == 0 {
		return Credentials{}, fmt.Errorf("%w: Secret %s/%s needs the keys %q and %q", ErrAuthSecret, namespace, name,
			AuthSecretUsername, AuthSecretPassword)
	}
	return Credentials{Username: string(u), Password: string(p)}, nil
}

// readAuthSecret reads the reference's basic auth, for the caller in ctx; every request
// for such a chart reads it again (a cache hit too): the read is the access check.
func (s *Source) readAuthSecret(ctx context.Context, ref Ref) (*Credentials, error) {
	if ref.AuthSecret == "" {
		return nil, nil
	}
	r := s.AuthSecrets
	if r == nil {
		return nil, fmt.Errorf("%w: no reader of basic auth Secrets is configured; Secret %s/%s not used",
			ErrCredentialsRefused, ref.Namespace, ref.AuthSecret)
	}
	c, err := r.ReadAuthSecret(ctx, ref.Namespace, ref.AuthSecret)
	if err != nil {
		return nil, err
	}
	return &c, nil
}
