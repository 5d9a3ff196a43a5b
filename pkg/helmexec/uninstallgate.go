package helmexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// secretsAPI and storageDriver name the layers withDeleteHooks wraps.
type (
	secretsAPI    = typedcorev1.SecretInterface
	storageDriver = storage.Driver
)

// sealPeek keeps the seal of the newest release Secret Helm reads (by its name's
// revision; one entry, whatever the namespace holds), and carries it into Helm's rewrite
// of that Secret (Helm writes only its own entries).
type sealPeek struct {
	typedcorev1.SecretInterface
	g *hookGate
}

func (s sealPeek) List(ctx context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	l, err := s.SecretInterface.List(ctx, o)
	if err == nil {
		for i := range l.Items {
			s.g.peek(&l.Items[i])
		}
	}
	return l, err
}

func (s sealPeek) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	sec, err := s.SecretInterface.Get(ctx, name, o)
	if err == nil {
		s.g.peek(sec)
	}
	return sec, err
}

func (s sealPeek) Update(ctx context.Context, sec *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	s.g.carry(sec)
	return s.SecretInterface.Update(ctx, sec, o)
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
func (g *hookGate) carry(sec *corev1.Secret) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seal.ref.Name != sec.Name || len(g.seal.raw) == 0 {
		return
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	if _, ok := sec.Data[release.DataDeployer]; !ok {
		sec.Data[release.DataDeployer] = g.seal.raw
	}
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

// hookRouter is an uninstall's kube client: every create is a hook's (an uninstall creates
// nothing else), so creates and their watches go through only when the hooks may run.
type hookRouter struct {
	kube.Interface // the uninstaller's
	g              *hookGate
}

// router wraps kc, the uninstaller's kube client, for this uninstall's hooks.
func (g *hookGate) router(kc kube.Interface) kube.Interface {
	return hookRouter{Interface: kc, g: g}
}

// hooks is the client hooks are created with now: the uninstaller's, or none.
func (r hookRouter) hooks() (kube.Interface, error) {
	p := r.g.decided()
	switch {
	case p == nil:
		return nil, errors.New("uninstall: no hook is created before its record is judged")
	case p.run == hooksAsCaller:
		return r.Interface, nil
	}
	return nil, fmt.Errorf("uninstall: delete hooks are not run: %s", p.why)
}

func (r hookRouter) Create(rl kube.ResourceList) (*kube.Result, error) {
	c, err := r.hooks()
	if err != nil {
		return nil, err
	}
	return c.Create(rl)
}

func (r hookRouter) WatchUntilReady(rl kube.ResourceList, timeout time.Duration) error {
	c, err := r.hooks()
	if err != nil {
		return err
	}
	return c.WatchUntilReady(rl, timeout)
}

// WaitForDelete is kube.InterfaceExt, passed through.
func (r hookRouter) WaitForDelete(rl kube.ResourceList, timeout time.Duration) error {
	if ext, ok := r.Interface.(kube.InterfaceExt); ok {
		return ext.WaitForDelete(rl, timeout)
	}
	return nil
}

// DeleteWithPropagationPolicy is kube.InterfaceDeletionPropagation, passed through.
func (r hookRouter) DeleteWithPropagationPolicy(rl kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if dp, ok := r.Interface.(kube.InterfaceDeletionPropagation); ok {
		return dp.DeleteWithPropagationPolicy(rl, policy)
	}
	return r.Interface.Delete(rl)
}

// GetPodList is kube.InterfaceLogs, passed through.
func (r hookRouter) GetPodList(namespace string, o metav1.ListOptions) (*corev1.PodList, error) {
	if lg, ok := r.Interface.(kube.InterfaceLogs); ok {
		return lg.GetPodList(namespace, o)
	}
	return &corev1.PodList{}, nil
}

// OutputContainerLogsForPodList is kube.InterfaceLogs, passed through.
func (r hookRouter) OutputContainerLogsForPodList(l *corev1.PodList, namespace string, w func(namespace, pod, container string) io.Writer) error {
	if lg, ok := r.Interface.(kube.InterfaceLogs); ok {
		return lg.OutputContainerLogsForPodList(l, namespace, w)
	}
	return nil
}
