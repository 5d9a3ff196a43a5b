package helmexec

import (
	"errors"
	"fmt"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
	driver3 "helm.sh/helm/v3/pkg/storage/driver"
	releasei4 "helm.sh/helm/v4/pkg/release"
	release4 "helm.sh/helm/v4/pkg/release/v1"
	driver4 "helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// The v4 engine stores through the same drivers as the v3 one (the guarded decode, the
// adopter, the seal, the relabel): v4Driver converts each release at their top. The
// fields Helm v4 adds to a record (release.V4Fields) do not survive Helm v3's types: they
// are carried around them, from the payload read to the release handed to Helm v4 and back
// into the payload written, so a record keeps one format whichever engine or CLI wrote it
// (docs/design.md, "Two engines").

// extrasByKey is what one action's storage knows of the v4 fields, per record key.
type extrasByKey struct{ m sync.Map }

func (x *extrasByKey) set(key string, e release.V4Fields) { x.m.Store(key, e) }

func (x *extrasByKey) get(key string) release.V4Fields {
	e, _ := x.m.Load(key)
	v, _ := e.(release.V4Fields)
	return v
}

// v4Driver is Helm v4's storage driver over a Helm v3 one.
type v4Driver struct {
	d      storage.Driver
	extras *extrasByKey
}

var _ driver4.Driver = (*v4Driver)(nil)

func (v *v4Driver) Name() string { return v.d.Name() }

func (v *v4Driver) Create(key string, rls releasei4.Releaser) error {
	return v.write(key, rls, v.d.Create)
}

func (v *v4Driver) Update(key string, rls releasei4.Releaser) error {
	return v.write(key, rls, v.d.Update)
}

func (v *v4Driver) write(key string, rls releasei4.Releaser, w func(string, *helmrelease.Release) error) error {
	r3, err := v.down(key, rls)
	if err != nil {
		return err
	}
	return v4Err(w(key, r3))
}

func (v *v4Driver) Delete(key string) (releasei4.Releaser, error) { return v.read(v.d.Delete(key)) }

func (v *v4Driver) Get(key string) (releasei4.Releaser, error) { return v.read(v.d.Get(key)) }

func (v *v4Driver) read(r3 *helmrelease.Release, err error) (releasei4.Releaser, error) {
	if err != nil {
		return nil, v4Err(err)
	}
	return v.up(r3)
}

func (v *v4Driver) List(filter func(releasei4.Releaser) bool) ([]releasei4.Releaser, error) {
	// The drivers under may filter further (the adopter hides the reservation): keep what
	// they return, each converted once.
	seen := map[*helmrelease.Release]*release4.Release{}
	var convErr error
	rels, err := v.d.List(func(r3 *helmrelease.Release) bool {
		r4, err := v.up(r3)
		if err != nil {
			if convErr == nil {
				convErr = err
			}
			return false
		}
		seen[r3] = r4
		return filter(r4)
	})
	if err != nil {
		return nil, v4Err(err)
	}
	out, err := v.upAll(rels, seen)
	if err != nil {
		return nil, err
	}
	return out, convErr
}

func (v *v4Driver) Query(labels map[string]string) ([]releasei4.Releaser, error) {
	rels, err := v.d.Query(labels)
	if err != nil {
		return nil, v4Err(err)
	}
	return v.upAll(rels, nil)
}

// upAll converts rels up, each once (known: those converted already).
func (v *v4Driver) upAll(rels []*helmrelease.Release, known map[*helmrelease.Release]*release4.Release) ([]releasei4.Releaser, error) {
	out := make([]releasei4.Releaser, 0, len(rels))
	for _, r3 := range rels {
		r4, ok := known[r3]
		if !ok {
			var err error
			if r4, err = v.up(r3); err != nil {
				return nil, err
			}
		}
		out = append(out, r4)
	}
	return out, nil
}

// down is a v4 release as Helm v3's, its v4 fields kept aside for the payload's write.
func (v *v4Driver) down(key string, rls releasei4.Releaser) (*helmrelease.Release, error) {
	r4, err := asV4(rls)
	if err != nil {
		return nil, err
	}
	var e release.V4Fields
	e.ApplyMethod = r4.ApplyMethod
	if r4.Info != nil {
		e.Info.RollbackRevision = r4.Info.RollbackRevision
	}
	v.extras.set(key, e)
	return releaseV3(r4)
}

// up is a v3 release as Helm v4's, with the v4 fields its payload held.
func (v *v4Driver) up(r3 *helmrelease.Release) (*release4.Release, error) {
	if r3 == nil {
		return nil, nil
	}
	r4, err := releaseV4(r3)
	if err != nil {
		return nil, err
	}
	e := v.extras.get(storage.Key(r3.Name, r3.Version))
	r4.ApplyMethod = e.ApplyMethod
	if r4.Info != nil {
		r4.Info.RollbackRevision = e.Info.RollbackRevision
	}
	return r4, nil
}

func asV4(rls releasei4.Releaser) (*release4.Release, error) {
	switch r := rls.(type) {
	case *release4.Release:
		return r, nil
	case release4.Release:
		return &r, nil
	}
	return nil, fmt.Errorf("unsupported release type %T", rls)
}

// v4StorageError is an error of the v3 drivers that Helm v4's errors.Is recognises too.
type v4StorageError struct{ err, v4 error }

func (e *v4StorageError) Error() string   { return e.err.Error() }
func (e *v4StorageError) Unwrap() []error { return []error{e.err, e.v4} }

// v4Errs are the v3 drivers' errors Helm v4 has its own of.
var v4Errs = [][2]error{{driver3.ErrReleaseNotFound, driver4.ErrReleaseNotFound}, {driver3.ErrReleaseExists, driver4.ErrReleaseExists},
	{driver3.ErrNoDeployedReleases, driver4.ErrNoDeployedReleases}, {driver3.ErrInvalidKey, driver4.ErrInvalidKey}}

func v4Err(err error) error {
	for _, e := range v4Errs {
		if errors.Is(err, e[0]) {
			return &v4StorageError{err, e[1]}
		}
	}
	return err
}

// extrasSecrets is the Secrets client under the v3 driver of a v4 action: it reads the v4
// fields of every payload it returns (the guarded decode) and writes those of the release
// being stored into its payload.
func extrasSecrets(si typedcorev1.SecretInterface, x *extrasByKey) secretsHook {
	return secretsHook{SecretInterface: si, got: x.peek, listed: x.peek, write: x.write}
}

// peek keeps the v4 fields of a record; one that does not decode has none (the guarded
// driver above refuses it anyway).
func (x *extrasByKey) peek(sec *corev1.Secret) {
	if sec == nil || sec.Data["release"] == nil {
		return
	}
	var e release.V4Fields
	if release.DecodeInto(sec.Data["release"], &e) == nil {
		x.set(sec.Name, e)
	}
}

func (x *extrasByKey) write(sec *corev1.Secret) error {
	e := x.get(sec.Name)
	if sec == nil || sec.Data["release"] == nil || e.Empty() {
		return nil
	}
	data, err := release.WithV4Fields(sec.Data["release"], e)
	if err != nil {
		return fmt.Errorf("write the helm v4 fields of %s: %w", sec.Name, err)
	}
	sec.Data["release"] = data
	return nil
}
