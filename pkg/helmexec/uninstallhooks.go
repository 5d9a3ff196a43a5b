package helmexec

import (
	"crypto/hmac"
	"fmt"
	"slices"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/signing"
)

// An uninstall runs the delete hooks of the release's latest record, and records are the
// tenant's to rewrite, while the executor may act as anyone. So a hook runs with no more
// authority than the record earned: as the identity whose async-helm action wrote it
// (release.DataDeployer, sealed with the signing key for the Secret), and only while the
// record's hooks are the ones sealed. Any other hook is not run, and the action's log says
// why. The uninstaller still deletes the release's objects (owned.go bounds what).
// Helm's own CLI runs delete hooks as whoever uninstalls (docs/security.md).

// DeleteHooks is how an uninstall treats the record's delete hooks.
type DeleteHooks struct {
	// Key verifies the record's seal of who wrote its hooks (without one, none verifies).
	Key signing.Key
	// Disabled: the request asked for none (Helm's --no-hooks).
	Disabled bool
}

// hookRun is as whom an uninstall runs the record's delete hooks, or that it runs none.
type hookRun int

const (
	hooksNone     hookRun = iota // the record has no delete hooks
	hooksSkipped                 // not run: why says
	hooksAsCaller                // the uninstaller wrote them
)

// hookEvidence is what the decision reads, gathered from the record Helm acts on.
type hookEvidence struct {
	disabled bool
	// deleteHooks is how many pre- or post-delete hooks the record holds.
	deleteHooks int
	// digest is release.HooksDigest of the record's hooks, as Helm read them.
	digest string
	// sealed is who wrote the hooks, from a seal that verified (nil: sealErr says why not).
	sealed  *release.Deployer
	sealErr error
	// caller is the uninstaller's release.IdentityDigest ("": the executor's own identity).
	caller string
}

// hookPlan is the decision: run as the uninstaller, or why not.
type hookPlan struct {
	run hookRun
	why string
}

// decideDeleteHooks decides as whom the record's delete hooks run, or that they do not.
func decideDeleteHooks(e hookEvidence) hookPlan {
	switch {
	case e.deleteHooks == 0:
		return hookPlan{run: hooksNone}
	case e.disabled:
		return hookPlan{run: hooksSkipped, why: "the request asked for none (no_hooks)"}
	case e.sealed == nil:
		return hookPlan{run: hooksSkipped, why: fmt.Sprintf("async-helm did not write them: %v", e.sealErr)}
	case e.sealed.Hooks != e.digest:
		return hookPlan{run: hooksSkipped, why: fmt.Sprintf("they changed after async-helm wrote them (sealed %s, now %s)",
			e.sealed.Hooks, e.digest)}
	case e.caller != "" && hmac.Equal([]byte(e.caller), []byte(e.sealed.Who)):
		return hookPlan{run: hooksAsCaller}
	}
	// The seal names who carried the hooks into this revision (a rollback or a chart-less
	// upgrade carries an earlier author's), not who wrote them: run as that identity, a
	// tenant's own uninstall would borrow a deployer's rights.
	return hookPlan{run: hooksSkipped, why: "another identity wrote them (name, groups and scopes), and they run only when it uninstalls"}
}

// countDeleteHooks is how many hooks of hooks run on a delete.
func countDeleteHooks(hooks []*helmrelease.Hook) int {
	n := 0
	for _, h := range hooks {
		if h != nil && (slices.Contains(h.Events, helmrelease.HookPreDelete) || slices.Contains(h.Events, helmrelease.HookPostDelete)) {
			n++
		}
	}
	return n
}

// hookGate holds one uninstall's decision, made when Helm reads the record it acts on
// (hookStorage) and applied there (hooks not run are taken out of the record) and by the
// kube client (actionKube: creates go to the identity decided, or nowhere).
type hookGate struct {
	name string
	opts DeleteHooks
	o    *configOptions // the action's identity (impersonate) and log, read when deciding

	mu sync.Mutex
	// seal is the newest revision's of the Secrets Helm read (peek).
	seal      peekedSeal
	peekedRev int
	plan      *hookPlan
}

// peekedSeal is what a release Secret Helm read holds of its seal.
type peekedSeal struct {
	ref release.SecretRef
	raw []byte
	big bool // over release.MaxDeployerBytes: not kept
}

// option makes an uninstall run the record's delete hooks as decideDeleteHooks says.
func (g *hookGate) option() Option {
	return func(o *configOptions) {
		g.o, o.hooks = o, g
		// The seal of the newest release Secret Helm reads (by its name's revision; one
		// entry, whatever the namespace holds), carried into Helm's rewrite of that Secret
		// (Helm writes only its own entries).
		withSecretsHook(secretsHook{got: g.peek, listed: g.peek, write: g.carry})(o)
		WithStorageWrapper(func(d storage.Driver) storage.Driver { return &hookStorage{Driver: d, g: g} })(o)
	}
}

// decide judges rel, the latest record Helm read, and takes out the hooks it may not run.
func (g *hookGate) decide(rel *helmrelease.Release) hookPlan {
	e := hookEvidence{disabled: g.opts.Disabled, deleteHooks: countDeleteHooks(rel.Hooks)}
	if id := g.o.impersonate; id != nil {
		e.caller = release.IdentityDigest(g.opts.Key, identityOf(id))
	}
	if e.deleteHooks > 0 && !e.disabled {
		e.sealed, e.sealErr = g.open(rel)
		if e.sealErr == nil {
			e.digest, e.sealErr = release.HooksDigest(rel.Hooks)
			if e.sealErr != nil {
				e.sealed = nil
			}
		}
	}
	plan := decideDeleteHooks(e)
	g.mu.Lock()
	g.plan = &plan
	g.mu.Unlock()
	if plan.run == hooksSkipped {
		rel.Hooks = nil
		g.o.log(LogHooksNotRun, e.deleteHooks, plan.why)
	}
	return plan
}

// LogHooksNotRun is the action log's line for hooks not run.
const LogHooksNotRun = "delete hooks not run (%d): %s"

// open verifies the seal of rel's Secret, as Helm read it.
func (g *hookGate) open(rel *helmrelease.Release) (*release.Deployer, error) {
	g.mu.Lock()
	p := g.seal
	g.mu.Unlock()
	switch {
	case p.ref.Name != release.SecretName(rel.Name, rel.Version):
		return nil, fmt.Errorf("%w: its Secret was not read", release.ErrDeployerSeal)
	case p.big:
		return nil, fmt.Errorf("%w: its %s entry is over %d bytes", release.ErrDeployerSeal, release.DataDeployer, release.MaxDeployerBytes)
	}
	return release.OpenDeployer(g.opts.Key, p.ref, p.raw)
}

func (g *hookGate) decided() *hookPlan {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.plan
}

// note is what the uninstall's result says of its hooks ("" when they ran or there were none).
func (g *hookGate) note() string {
	if p := g.decided(); p != nil && p.run == hooksSkipped {
		return fmt.Sprintf("; delete hooks not run: %s", p.why)
	}
	return ""
}

// peek keeps sec's seal if sec is the newest revision of the release read so far.
func (g *hookGate) peek(sec *corev1.Secret) {
	name, rev, ok := release.ParseSecretName(sec.Name)
	if !ok || name != g.name {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.peekedRev > rev {
		return
	}
	raw := sec.Data[release.DataDeployer]
	p := peekedSeal{ref: release.SecretRef{Namespace: sec.Namespace, Name: sec.Name, UID: sec.UID}, big: len(raw) > release.MaxDeployerBytes}
	if !p.big {
		p.raw = raw
	}
	g.peekedRev, g.seal = rev, p
}

// carry writes the kept seal back into Helm's rewrite of its Secret.
func (g *hookGate) carry(sec *corev1.Secret) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seal.ref.Name != sec.Name || len(g.seal.raw) == 0 {
		return nil
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	if _, ok := sec.Data[release.DataDeployer]; !ok {
		sec.Data[release.DataDeployer] = g.seal.raw
	}
	return nil
}

// hookStorage decides on the latest record of every history Helm reads (an uninstall reads
// one: the record whose hooks it runs).
type hookStorage struct {
	storage.Driver
	g *hookGate
}

func (h *hookStorage) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	rels, err := h.Driver.Query(labels)
	if err != nil {
		return rels, err
	}
	var latest *helmrelease.Release
	for _, r := range rels {
		if r != nil && r.Name == h.g.name && (latest == nil || r.Version > latest.Version) {
			latest = r
		}
	}
	if latest != nil {
		h.g.decide(latest)
	}
	return rels, nil
}
