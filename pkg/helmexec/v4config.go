package helmexec

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	action4 "helm.sh/helm/v4/pkg/action"
	common4 "helm.sh/helm/v4/pkg/chart/common"
	kube4 "helm.sh/helm/v4/pkg/kube"
	storage4 "helm.sh/helm/v4/pkg/storage"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
)

// Engine is the Helm SDK a factory's actions run on (docs/design.md, "Two engines").
type Engine string

const (
	// EngineV3 is helm.sh/helm/v3, the default.
	EngineV3 Engine = "v3"
	// EngineV4 is helm.sh/helm/v4.
	EngineV4 Engine = "v4"
)

// ParseEngine reads HELM_ENGINE ("" is v3).
func ParseEngine(s string) (Engine, error) {
	switch Engine(s) {
	case "", EngineV3:
		return EngineV3, nil
	case EngineV4:
		return EngineV4, nil
	}
	return "", fmt.Errorf("unknown helm engine %q (v3 or v4)", s)
}

// WithEngine runs the factory's install, upgrade, rollback and uninstall on e. Reads
// (List, History, Latest) and renders stay on Helm v3's types: the records are one format.
func WithEngine(e Engine) FactoryOption {
	return func(o *factoryOptions) { o.engine = e }
}

// Engine is the engine the factory's actions run on.
func (f *Factory) Engine() Engine {
	if f.engine == "" {
		return EngineV3
	}
	return f.engine
}

// WithTransport wraps the transport of every request the factory's actions and clients
// send (a test's count of the API watches an action opens).
func WithTransport(wrap func(http.RoundTripper) http.RoundTripper) FactoryOption {
	return func(o *factoryOptions) { o.transport = wrap }
}

func (f *Factory) v4() bool { return f.engine == EngineV4 }

// configureV4 is a Helm v4 action configuration on base's storage chain, discovery and
// identity, and base's Helm v3 configuration; ctx ends its waits.
func (f *Factory) configureV4(ctx context.Context, namespace string, opts []Option) (*action4.Configuration, *action.Configuration, error) {
	o := optionsOf(opts)
	extras := &extrasByKey{}
	withSecretsHook(extrasSecrets(nil, extras))(&o)
	read, getter, err := f.base(namespace, &o)
	if err != nil {
		return nil, nil, err
	}
	h := logHandler{log: o.log}
	c := kube4.New(getter)
	c.Factory = kubeFactory{Factory: cmdutil.NewFactory(getter), s: f.shared, budget: getter.budget}
	c.Namespace = namespace
	c.SetLogger(h)
	store := storage4.Init(&v4Driver{d: read.Releases.Driver, extras: extras})
	store.SetLogger(h)
	ac := action4.NewConfiguration(action4.ConfigurationSetLogger(h))
	ac.RESTClientGetter = getter
	var kc kube4.Interface = v4Reachability{Interface: c, s: f.shared, waits: polledWaiter{ctx: ctx, get: o.liveGetter()}}
	if o.kube4 != nil {
		kc = o.kube4
	}
	if o.caps != nil { // tests without a cluster
		ac.Capabilities = common4.DefaultCapabilities.Copy()
	}
	ac.KubeClient = v4Kube{Interface: kc, actionGuard: o.actionGuard(), ctx: ctx}
	ac.Releases = store
	return ac, read, nil
}

// v4Reachability answers IsReachable from the shared server version, as sharedReachability,
// and waits with polledWaiter.
type v4Reachability struct {
	kube4.Interface
	s     *sharedDiscovery
	waits polledWaiter
}

func (c v4Reachability) IsReachable() error { return c.s.reachable() }

// GetWaiterWithOptions is polledWaiter, hooks only with HookOnlyStrategy (the contexts of o
// are the action's, which the waiter already has).
func (c v4Reachability) GetWaiterWithOptions(ws kube4.WaitStrategy, _ ...kube4.WaitOption) (kube4.Waiter, error) {
	w := c.waits
	w.hooksOnly = ws == kube4.HookOnlyStrategy
	return w, nil
}

func (c v4Reachability) GetWaiter(ws kube4.WaitStrategy) (kube4.Waiter, error) {
	return c.GetWaiterWithOptions(ws)
}

// logHandler is Helm v4's slog log as the debug log the executor keeps: "message key=value".
type logHandler struct {
	log   func(string, ...any)
	attrs []slog.Attr
}

func (h logHandler) Enabled(context.Context, slog.Level) bool { return h.log != nil }

func (h logHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	h.log("%s", b.String())
	return nil
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return h
}

// WithGroup is h: Helm v4 names no groups.
func (h logHandler) WithGroup(string) slog.Handler { return h }
