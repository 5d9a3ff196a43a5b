package helmexec

import (
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

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
