package helmexec

import (
	"sync/atomic"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/signing"
)

// DeployerSeal seals, in each write of the action's own revision, who the action runs as
// and the hooks its Helm wrote (release.DataDeployer): what a later uninstall runs that
// record's delete hooks as (uninstallhooks.go).
type DeployerSeal struct {
	Key signing.Key
	// Secret is the revision's Secret: the reservation the action adopts (its UID is the one
	// the request was accepted for; a write of another Secret is not sealed).
	Secret release.SecretRef
}

// WithDeployerSeal seals the action's writes of s.Secret with the identity it impersonates
// (none without impersonation: the executor's own identity is no one's to run hooks as).
func WithDeployerSeal(s DeployerSeal) Option {
	cell := &sealCell{}
	return func(o *configOptions) {
		if !s.Key.Set() || s.Secret.UID == "" {
			return
		}
		o.sealed = &s
		beforeWrite((&sealer{seal: s, o: o, cell: cell}).prepare)(o)
		withSecretsHook(secretsHook{write: cell.stamp(s.Secret.Name)})(o)
	}
}

// sealCell hands the seal of a record from the driver (which has the release) to the
// Secrets client (which writes it), within one write.
type sealCell struct{ entry atomic.Pointer[[]byte] }

func (c *sealCell) set(b []byte) { c.entry.Store(&b) }

func (c *sealCell) get() []byte {
	if p := c.entry.Load(); p != nil {
		return *p
	}
	return nil
}

// sealer computes the seal of each write of the sealed Secret's record (cell.stamp writes it).
type sealer struct {
	seal DeployerSeal
	o    *configOptions
	cell *sealCell
}

func (d *sealer) prepare(key string, rls *helmrelease.Release) {
	if key != d.seal.Secret.Name {
		return
	}
	d.cell.set(nil)
	id := d.o.impersonate
	if id == nil || id.UserName == "" || rls == nil {
		return
	}
	digest, err := release.HooksDigest(rls.Hooks)
	if err != nil {
		d.o.log("hooks of %s not sealed: %v", key, err)
		return
	}
	entry, err := release.SealDeployer(d.seal.Key, d.seal.Secret, release.Deployer{
		Who: release.IdentityDigest(d.seal.Key, identityOf(id)), Hooks: digest})
	if err != nil {
		d.o.log("hooks of %s not sealed: %v", key, err)
		return
	}
	d.cell.set(entry)
}

// stamp writes the prepared seal into each write of the sealed Secret, name.
func (c *sealCell) stamp(name string) func(*corev1.Secret) error {
	return func(sec *corev1.Secret) error {
		if sec.Name != name {
			return nil
		}
		entry := c.get()
		if len(entry) == 0 {
			delete(sec.Data, release.DataDeployer)
			return nil
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[release.DataDeployer] = entry
		return nil
	}
}

// SealFor is the DeployerSeal of revision of release name in namespace, whose Secret has uid.
func SealFor(key signing.Key, namespace, name string, revision int, uid types.UID) DeployerSeal {
	return DeployerSeal{Key: key, Secret: release.SecretRef{Namespace: namespace, Name: release.SecretName(name, revision), UID: uid}}
}

// DeployerSealOf is the seal opts make the action write (false: none).
func DeployerSealOf(opts ...Option) (DeployerSeal, bool) {
	o := optionsOf(opts)
	if o.sealed == nil {
		return DeployerSeal{}, false
	}
	return *o.sealed, true
}

// identityOf is the identity an impersonation config acts as.
func identityOf(c *rest.ImpersonationConfig) release.Identity {
	return release.Identity{User: c.UserName, UID: c.UID, Groups: c.Groups, Extra: c.Extra}
}
