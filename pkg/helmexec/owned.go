package helmexec

import (
	"errors"
	"fmt"
	"sync"

	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
)

// Helm deletes, as the caller, the objects of the release's current record that the new
// one lacks (upgrade, rollback) and every object of the record on uninstall. Records are
// the tenant's to rewrite, so those lists are hostile: only an object that is live and
// carries Helm's ownership annotations for this release is deleted; any other is kept and
// named in the action's log (Helm v4's uninstall keeps objects it does not own the same
// way). Both engines' kube clients filter through owner.deletable.

// Helm's ownership annotations (install, upgrade and rollback write them on every object).
const (
	annoReleaseName      = "meta.helm.sh/release-name"
	annoReleaseNamespace = "meta.helm.sh/release-namespace"
)

// LogKeptUnowned is the action log's line for an object Helm would have deleted.
const LogKeptUnowned = "kept %s %q in namespace %q: %s"

// owner is the release an action acts on.
type owner struct {
	name, namespace string
	// recordHooks: the action's hooks come from the release's record (an uninstall), not
	// from the requested chart or the pinned record.
	recordHooks bool
	created     *createdObjects
}

// ownedBy makes the action's kube client delete only what the release owns.
func ownedBy(req Request) Option {
	return func(o *configOptions) {
		o.owner = &owner{name: req.Name, namespace: req.Namespace, created: &createdObjects{}}
	}
}

// ownedByRecordHooks is ownedBy for an action whose hooks come from the release's record.
func ownedByRecordHooks(req Request) Option {
	return func(o *configOptions) {
		o.owner = &owner{name: req.Name, namespace: req.Namespace, recordHooks: true, created: &createdObjects{}}
	}
}

// liveGetter reads an object as it is now, with the action's identity.
type liveGetter func(*resource.Info) (runtime.Object, error)

func liveObject(info *resource.Info) (runtime.Object, error) {
	if info.Client == nil || info.Mapping == nil {
		return nil, errors.New("no client to read it with")
	}
	return resource.NewHelper(info.Client, info.Mapping).Get(info.Namespace, info.Name)
}

func (o *configOptions) liveGetter() liveGetter {
	if o.live != nil {
		return o.live
	}
	return liveObject
}

type verdict int

const (
	deleteIt verdict = iota
	gone             // not found: nothing to delete
	keep
)

// judge decides one object from its live annotations (or the error reading it).
func (w owner) judge(annotations map[string]string, err error) (verdict, string) {
	switch {
	case apierrors.IsNotFound(err):
		return gone, ""
	case err != nil:
		return keep, fmt.Sprintf("its ownership could not be read: %v", err)
	case annotations[annoReleaseName] != w.name || annotations[annoReleaseNamespace] != w.namespace:
		return keep, fmt.Sprintf("not owned by release %s/%s (%s=%q, %s=%q)", w.namespace, w.name,
			annoReleaseName, annotations[annoReleaseName], annoReleaseNamespace, annotations[annoReleaseNamespace])
	}
	return deleteIt, ""
}

// ownedOf is what of infos may be deleted; the rest is logged as kept. With hooks (a
// delete, not an update), an object the release does not own may still go as a hook.
func (w owner) ownedOf(infos []*resource.Info, hooks bool, get liveGetter, log func(string, ...any)) []*resource.Info {
	var out []*resource.Info
	for _, info := range infos {
		if info == nil {
			continue
		}
		live, err := get(info)
		var m metav1.Object
		if err == nil {
			m, err = meta.Accessor(live)
		}
		var annotations map[string]string
		if err == nil {
			annotations = m.GetAnnotations()
		}
		v, why := w.judge(annotations, err)
		if v == keep && err == nil && hooks {
			v, why = w.judgeHook(info, m, why)
		}
		switch v {
		case deleteIt:
			out = append(out, info)
		case keep:
			log(LogKeptUnowned, kindOf(info), info.Name, info.Namespace, why)
		}
	}
	return out
}

// judgeHook decides an object the release does not own that Helm deletes as a hook (a
// delete policy). The manifest cannot vouch for it: Helm's sorter reads annotations
// case-insensitively and the built object exactly, so a record can hide the hook
// annotation from the sorter yet carry it into the delete. Only the live object counts,
// and Helm writes helm.sh/hook on every hook it creates. An uninstall's hooks come from a
// record: there a hook outside the release's namespace goes only if this action created
// it, since such a leftover may be another release's (in the namespace, the tenant could
// delete it anyway).
func (w owner) judgeHook(info *resource.Info, live metav1.Object, why string) (verdict, string) {
	if _, ok := live.GetAnnotations()[helmrelease.HookAnnotation]; !ok {
		return keep, why
	}
	if !w.recordHooks || live.GetNamespace() == w.namespace || w.created.has(info) {
		return deleteIt, ""
	}
	return keep, fmt.Sprintf("a hook outside namespace %s this uninstall did not create", w.namespace)
}

// createdObjects are the objects an action created (its hooks), by group, kind, namespace
// and name.
type createdObjects struct{ keys sync.Map }

func objectKey(info *resource.Info) string {
	gk := ""
	if info.Mapping != nil {
		gk = info.Mapping.GroupVersionKind.GroupKind().String()
	}
	return gk + "/" + info.Namespace + "/" + info.Name
}

func (c *createdObjects) add(infos []*resource.Info) {
	if c == nil {
		return
	}
	for _, info := range infos {
		if info != nil {
			c.keys.Store(objectKey(info), true)
		}
	}
}

func (c *createdObjects) has(info *resource.Info) bool {
	if c == nil {
		return false
	}
	_, ok := c.keys.Load(objectKey(info))
	return ok
}

// deletable is original without the objects an update would delete (those target lacks)
// that the release does not own: Helm's update deletes original minus target.
func (w owner) deletable(original, target []*resource.Info, get liveGetter, log func(string, ...any)) []*resource.Info {
	candidates := kube.ResourceList(original).Difference(target)
	if len(candidates) == 0 {
		return original
	}
	allowed := map[*resource.Info]bool{}
	for _, info := range w.ownedOf(candidates, false, get, log) {
		allowed[info] = true
	}
	out := make([]*resource.Info, 0, len(original))
	for _, info := range original {
		if kube.ResourceList(target).Contains(info) || allowed[info] {
			out = append(out, info)
		}
	}
	return out
}

func kindOf(info *resource.Info) string {
	if info.Mapping == nil {
		return "object"
	}
	return info.Mapping.GroupVersionKind.Kind
}
