// Package helmexec is the only place that calls the Helm SDK's actions: it builds
// action.Configuration values and runs install, upgrade, list and get.
package helmexec

import (
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	helmstorage "helm.sh/helm/v3/pkg/storage"
	kube4 "helm.sh/helm/v4/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// Factory builds action configurations for one cluster. Discovery, the REST mapper, the
// server version and the field-validation answers are shared by every action
// (discovery.go; the GitLab chart alone has dozens of kinds to map).
type Factory struct {
	rest   *rest.Config
	shared *sharedDiscovery
	// engine runs install, upgrade, rollback and uninstall (v4config.go).
	engine Engine
	// renders renders the templates of installs and upgrades, and checks their values
	// (render_out.go).
	renders *RenderPool
}

// NewFactory prepares a factory for the cluster of cfg.
func NewFactory(cfg *rest.Config, opts ...FactoryOption) (*Factory, error) {
	var o factoryOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.transport != nil {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(o.transport)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	if o.renders == nil {
		o.renders = &RenderPool{}
	}
	return &Factory{rest: cfg, shared: newSharedDiscovery(dc, o), engine: o.engine, renders: o.renders}, nil
}

// Option changes a configuration before it is used.
type Option func(*configOptions)

type configOptions struct {
	driver      storage.Driver
	kube        kube.Interface
	caps        *chartutil.Capabilities
	wraps       []func(storage.Driver) storage.Driver
	secrets     []func(typedcorev1.SecretInterface) typedcorev1.SecretInterface
	log         func(string, ...any)
	impersonate *rest.ImpersonationConfig
	fence       *Fence
	gate        WaitGate        // slots.go
	api         APIGate         // slots.go
	kube4       kube4.Interface // v4config.go
	owner       *owner          // owned.go: deletes only what this release owns
	live        liveGetter      // owned.go (tests)
	hooks       *hookGate       // uninstallhooks.go: as whom an uninstall's hooks run
	sealed      *DeployerSeal   // deployerseal.go: the Secret whose writes are sealed
	readBudget  *release.ReadBudget
}

// optionsOf is what opts set (Helm's debug log discarded without WithLog).
func optionsOf(opts []Option) configOptions {
	o := configOptions{log: func(string, ...any) {}}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithReadBudget makes the action's reads of records draw on b, shared with the other
// reads given b (one list over many namespaces: one read's budget, not one each).
func WithReadBudget(b *release.ReadBudget) Option {
	return func(o *configOptions) { o.readBudget = b }
}

// WithFence closes the action off from the cluster once f.End is called (its storage
// sealed, its kube client refusing), and counts Helm's leftovers in f.Orphans.
func WithFence(f *Fence) Option {
	return func(o *configOptions) { o.fence = f }
}

// WithImpersonation runs the action as this user: the chart can create only what the user
// may create, and Helm writes the release secrets as the user.
func WithImpersonation(user, uid string, groups []string, extra map[string][]string) Option {
	return func(o *configOptions) {
		o.impersonate = &rest.ImpersonationConfig{UserName: user, UID: uid, Groups: groups, Extra: extra}
	}
}

// WithStorageWrapper wraps the Secrets storage driver (the reservation adopter, fault
// injection); wrappers apply in the order given, each around the previous one.
func WithStorageWrapper(w func(storage.Driver) storage.Driver) Option {
	return func(o *configOptions) { o.wraps = append(o.wraps, w) }
}

// WithSecretsClient wraps the Secrets client under Helm's driver (the executor keeps the
// revision's stored event in it while the revision is pending).
func WithSecretsClient(w func(typedcorev1.SecretInterface) typedcorev1.SecretInterface) Option {
	return func(o *configOptions) { o.secrets = append(o.secrets, w) }
}

// WithDriver stores releases in d instead of the namespace's Secrets (Helm's memory
// driver in unit tests); the storage wrappers still apply around it, the Secrets client
// wrappers do not.
func WithDriver(d storage.Driver) Option {
	return func(o *configOptions) { o.driver = d }
}

// WithKubeClient applies manifests through kc instead of the cluster (Helm's
// kubefake.PrintingKubeClient or FailingKubeClient in unit tests).
func WithKubeClient(kc kube.Interface) Option {
	return func(o *configOptions) { o.kube = kc }
}

// WithCapabilities gives Helm the cluster's capabilities instead of asking discovery
// (chartutil.DefaultCapabilities in unit tests).
func WithCapabilities(c *chartutil.Capabilities) Option {
	return func(o *configOptions) { o.caps = c }
}

// WithLog sends Helm's debug log to fn.
func WithLog(fn func(string, ...any)) Option {
	return func(o *configOptions) { o.log = fn }
}

// LogOf is the debug log opts give Helm (one that discards without WithLog): for fakes of
// Helm in tests of callers.
func LogOf(opts ...Option) func(string, ...any) { return optionsOf(opts).log }

// Configuration builds an action.Configuration for namespace ("" = all namespaces,
// for listing).
func (f *Factory) Configuration(namespace string, opts ...Option) (*action.Configuration, error) {
	o := optionsOf(opts)
	cfg, getter, err := f.base(namespace, &o)
	if err != nil {
		return nil, err
	}
	kc := o.kube
	if kc == nil { // Helm's, with the action's identity, on the shared discovery
		c := kube.New(getter)
		c.Factory = kubeFactory{Factory: cmdutil.NewFactory(getter), s: f.shared, budget: getter.budget}
		c.Namespace = namespace
		c.Log = o.log
		kc = sharedReachability{Client: c, s: f.shared}
	}
	cfg.KubeClient = o.actionClient(kc)
	return cfg, nil
}

// base is what either engine's configuration is built on: the getter (the action's
// identity, fenced, on the shared discovery) and Helm v3's configuration, without a kube
// client, over the action's storage chain: both engines read records and render through it.
func (f *Factory) base(namespace string, o *configOptions) (*action.Configuration, *restGetter, error) {
	cfg := f.restAs(o)
	o.fence.guardREST(cfg)
	d, err := f.driverChain(cfg, namespace, o)
	if err != nil {
		return nil, nil, err
	}
	getter := &restGetter{f: f, rest: cfg, namespace: namespace, budget: &missBudget{}}
	return &action.Configuration{RESTClientGetter: getter, Releases: helmstorage.Init(d), Capabilities: o.caps, Log: o.log}, getter, nil
}

// driverChain is the storage an action's Helm stores through: the namespace's Secrets
// (the guarded driver) or the options' driver, the options' wrappers around it, and the
// fence's seal outermost. Both engines store through it.
func (f *Factory) driverChain(cfg *rest.Config, namespace string, o *configOptions) (storage.Driver, error) {
	d := o.driver
	if m, ok := d.(*storage.Memory); ok {
		// As Helm's own Configuration.Init does for its memory driver: the configuration's
		// namespace scopes it ("" reads every namespace), as the Secrets client does.
		m.SetNamespace(namespace)
	}
	if d == nil {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		si := cs.CoreV1().Secrets(namespace)
		for _, w := range o.secrets {
			si = w(si)
		}
		// Records are tenant input: Helm's own driver dereferences nil on one that does not
		// decode; the guarded one answers an error.
		sec := release.GuardedSecrets(si)
		sec.Log = o.log
		sec.Shared = o.readBudget
		d = sec
	}
	for _, w := range o.wraps {
		d = w(d)
	}
	if o.fence != nil { // outermost: refused before any wrapper acts
		d = o.fence.storage(d)
	}
	return d, nil
}

// restGetter hands Helm's kube client the factory's shared discovery and mapper; the
// REST config (the action's identity) is the action's own.
type restGetter struct {
	f         *Factory
	rest      *rest.Config
	namespace string
	budget    *missBudget
}

func (g *restGetter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.rest), nil }
func (g *restGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	return actionDiscovery{CachedDiscoveryInterface: g.f.shared.cache, s: g.f.shared}, nil
}
func (g *restGetter) ToRESTMapper() (meta.RESTMapper, error) {
	return missMapper{s: g.f.shared, budget: g.budget}, nil
}
func (g *restGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(),
		&clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: g.namespace}})
}

// Client is a Kubernetes client with the options' identity (impersonation): what the
// executor reads about a release's objects while Helm runs, with the caller's rights.
func (f *Factory) Client(opts ...Option) (kubernetes.Interface, error) {
	o := optionsOf(opts)
	cs, err := kubernetes.NewForConfig(f.restAs(&o))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// restAs is the factory's REST config as the options' identity (impersonation).
func (f *Factory) restAs(o *configOptions) *rest.Config {
	cfg := rest.CopyConfig(f.rest)
	if o.impersonate != nil {
		cfg.Impersonate = *o.impersonate
	}
	return cfg
}

// FieldManager is the field manager of everything Helm applies for async-helm: the helm
// CLI's (Helm's default is the binary's name). Helm v4 moves a release from client-side to
// server-side apply by converting the managed fields of "helm" only: under another name, a
// later `helm upgrade --server-side=true` would conflict with that manager
// (docs/design.md, "Two engines").
const FieldManager = "helm"

// Both Helms read the manager from a package variable only; set once, before any action runs.
func init() { kube.ManagedFieldsManager, kube4.ManagedFieldsManager = FieldManager, FieldManager }
