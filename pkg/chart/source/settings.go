package source

import (
	"fmt"
	"time"
)

// Settings are the chart settings of every function that fetches charts (its environment).
type Settings struct {
	// ChartRepositories lists the repositories of index entries: "name=url,name=url".
	ChartRepositories string `envconfig:"CHART_REPOSITORIES"`
	// ChartRepositorySecrets names the Secret of a repository's credentials: "name:secret,...".
	ChartRepositorySecrets map[string]string `envconfig:"CHART_REPOSITORY_SECRETS"`
	ChartSecretsNamespace  string            `envconfig:"CHART_SECRETS_NAMESPACE" default:"async-helm"`
	// Loopback and private hosts are refused unless allowed; AllowChartAddresses (ip:port)
	// are allowed whatever their range.
	AllowLoopbackCharts bool     `envconfig:"ALLOW_LOOPBACK_CHARTS"`
	AllowPrivateCharts  bool     `envconfig:"ALLOW_PRIVATE_CHARTS"`
	AllowChartAddresses []string `envconfig:"ALLOW_CHART_ADDRESSES"`
	// PlainHTTPRegistries are OCI registries (host:port) without TLS, as helm's --plain-http.
	PlainHTTPRegistries []string `envconfig:"CHART_PLAIN_HTTP_REGISTRIES"`
	// ChartCacheMiB bounds the chart cache (0: bounds.DefaultCacheBytes).
	ChartCacheMiB int64 `envconfig:"CHART_CACHE_MIB"`
	// ChartIndexRefresh is how often the repositories' indexes are fetched again.
	ChartIndexRefresh time.Duration `envconfig:"CHART_INDEX_REFRESH" default:"5m"`
	// The budget of one chart's unpacked tree (0: bounds' defaults).
	ChartMaxUnpackedMiB int64 `envconfig:"CHART_MAX_UNPACKED_MIB"`
	ChartMaxFiles       int   `envconfig:"CHART_MAX_FILES"`
	ChartMaxDepth       int   `envconfig:"CHART_MAX_DEPTH"`
	ChartMaxYAMLNodes   int64 `envconfig:"CHART_MAX_YAML_NODES"`
	// ChartMaxParallelLoads is Source.MaxParallelLoads.
	ChartMaxParallelLoads int `envconfig:"CHART_MAX_PARALLEL_LOADS" default:"2"`
	RouteSettings
}

// RouteSettings bound submit's chart and template routes, which any valid token may call.
type RouteSettings struct {
	// ChartRoutesRate and ChartRoutesBurst are each caller's token bucket (CallerLimits).
	ChartRoutesRate  float64 `envconfig:"CHART_ROUTES_RATE" default:"2"`
	ChartRoutesBurst int     `envconfig:"CHART_ROUTES_BURST" default:"10"`
	// A template route's render runs in a child killed after its timeout, its data segment
	// bounded, so many at once.
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

// NewSource builds a chart source from the settings and the creds repos.NewSource reads.
func (c Settings) NewSource(creds map[string]Credentials, ttl, timeout time.Duration) (*Source, error) {
	repos, err := ParseRepositories(c.ChartRepositories)
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
