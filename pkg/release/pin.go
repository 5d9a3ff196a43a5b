package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrTargetRewritten: the record a rollback would restore is not the one pinned when the
// request was accepted (records are the tenant's to rewrite).
var ErrTargetRewritten = errors.New("the rollback target changed since the request was accepted")

// Pin is the record a rollback may restore, fixed when submit accepts the request: its
// revision and the RecordDigest of what Helm's rollback takes (revision 0: no rollback).
type Pin struct {
	Revision int    `json:"revision"`
	Digest   string `json:"digest,omitempty"`
}

// PinOf pins rel (nil: nothing to roll back to), whose Secret holds applyMethod (Helm v4's
// apply_method, "" for a record without one: Store.ApplyMethod).
func PinOf(rel *helmrelease.Release, applyMethod string) (*Pin, error) {
	if rel == nil {
		return &Pin{}, nil
	}
	d, err := RecordDigest(rel, applyMethod)
	if err != nil {
		return nil, err
	}
	return &Pin{Revision: rel.Version, Digest: d}, nil
}

// Check refuses rel (its Secret holding applyMethod) as the rollback target unless it is
// the pinned revision with the pinned digest. The error names the revision.
func (p *Pin) Check(rel *helmrelease.Release, applyMethod string) error {
	if p.Revision == 0 {
		return fmt.Errorf("%w: no revision was deployed when it was accepted, so none may be rolled back to", ErrTargetRewritten)
	}
	if rel.Version != p.Revision {
		return fmt.Errorf("%w: it pinned revision %d, not %d", ErrTargetRewritten, p.Revision, rel.Version)
	}
	got, err := RecordDigest(rel, applyMethod)
	if err != nil {
		return err
	}
	if got != p.Digest {
		return fmt.Errorf("%w: revision %d was rewritten (its chart, values, manifest, hooks or apply method are %s, accepted %s)",
			ErrTargetRewritten, rel.Version, got, p.Digest)
	}
	return nil
}

// pinned is what Helm's rollback copies from its target into the new revision.
type pinned struct {
	Chart    *chart.Chart        `json:"chart,omitempty"`
	Config   map[string]any      `json:"config,omitempty"`
	Manifest string              `json:"manifest"`
	Hooks    []*helmrelease.Hook `json:"hooks,omitempty"`
	Notes    string              `json:"notes,omitempty"`
	// ApplyMethod is Helm v4's apply_method (its rollback with server-side "auto" applies as
	// the target was applied); omitted when empty, so a record without one digests as before.
	ApplyMethod string `json:"applyMethod,omitempty"`
}

// RecordDigest identifies what a rollback to rel applies: sha256 of its chart, values,
// manifest, hooks (without their last run), notes and apply method; not its status and
// description, which async-helm's own actions move.
func RecordDigest(rel *helmrelease.Release, applyMethod string) (string, error) {
	p := pinned{Chart: rel.Chart, Config: rel.Config, Manifest: rel.Manifest, ApplyMethod: applyMethod}
	if rel.Info != nil {
		p.Notes = rel.Info.Notes
	}
	p.Hooks = digestedHooks(rel.Hooks)
	b, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("encode revision %d: %w", rel.Version, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ErrValuesRewritten: the values an upgrade would reuse are not those of the record submit
// read when it accepted the upgrade (records are the tenant's to rewrite).
var ErrValuesRewritten = errors.New("the values the upgrade reuses changed since the request was accepted")

// ValuesPinOf pins the values an upgrade that reuses them takes from base (nil: none):
// its revision and ConfigDigest. Pin.CheckValues checks them.
func ValuesPinOf(base *helmrelease.Release) (*Pin, error) {
	d, err := ConfigDigest(base)
	if err != nil || base == nil {
		return &Pin{}, err
	}
	return &Pin{Revision: base.Version, Digest: d}, nil
}

// CheckValues refuses rel as the record whose values an upgrade reuses unless they are
// the pinned ones: only the values count, so no record and a record without values are
// alike (nothing is reused), and so are two revisions with the same values.
func (p *Pin) CheckValues(rel *helmrelease.Release) error {
	got, err := ConfigDigest(rel)
	if err != nil || got == p.Digest {
		return err
	}
	what := "no revision holds values"
	if rel != nil {
		what = fmt.Sprintf("revision %d holds values %s", rel.Version, got)
	}
	want := "none"
	if p.Digest != "" {
		want = fmt.Sprintf("%s of revision %d", p.Digest, p.Revision)
	}
	return fmt.Errorf("%w: %s, accepted %s", ErrValuesRewritten, what, want)
}

// ConfigDigest identifies the values an upgrade reuses from rel: sha256 of its config, ""
// when it holds none (nil rel too).
func ConfigDigest(rel *helmrelease.Release) (string, error) {
	if rel == nil || len(rel.Config) == 0 {
		return "", nil
	}
	b, err := json.Marshal(rel.Config)
	if err != nil {
		return "", fmt.Errorf("encode the values of revision %d: %w", rel.Version, err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// ApplyMethod is the apply_method Helm v4 keeps in revision's record beside Helm v3's
// fields ("" when it has none), as a rollback pin digests it.
func (s *Store) ApplyMethod(ctx context.Context, namespace, name string, revision int) (string, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, SecretName(name, revision), metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the apply method of %s/%s revision %d: %w", namespace, name, revision, err)
	}
	return ApplyMethodOf(sec.Data["release"])
}

// ApplyMethodOf is the apply_method of a record's payload (the guarded decode).
func ApplyMethodOf(payload []byte) (string, error) {
	var v struct {
		ApplyMethod string `json:"apply_method"`
	}
	if err := DecodeInto(payload, &v); err != nil {
		return "", err
	}
	return v.ApplyMethod, nil
}
