package actionlog

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// Labels and annotations of a log's ConfigMap.
const (
	LabelNamespace = "async-helm.io/log-namespace"
	LabelRelease   = "async-helm.io/log-release"
	LabelRevision  = "async-helm.io/log-revision"
	// LabelNamespaceUID is the UID of the namespace the log's action ran in ("" when it was
	// gone): a log is answered only in that very namespace, not in one re-made under its name.
	LabelNamespaceUID   = "async-helm.io/log-namespace-uid"
	annotationRequestID = "async-helm.io/log-request-id"
	annotationAction    = "async-helm.io/log-action"
	annotationStarted   = "async-helm.io/log-started"
	annotationUpdated   = "async-helm.io/log-updated"
	annotationState     = "async-helm.io/log-state"
	stateRunning        = "running"
	stateEnded          = "ended"
	dataKey             = "log.json"
	maxListed           = 50
	maxStoredBytes      = 1 << 20
	namePrefix          = "actionlog-"
	// DefaultKeep is how many logs a release keeps when none is configured.
	DefaultKeep = 5
	// DefaultNamespaceKeep is how many logs a namespace keeps, all its releases together,
	// when the Store says none: new release names would grow them without bound.
	DefaultNamespaceKeep = 100
)

// Record is one revision's log as stored.
type Record struct {
	Namespace, Name   string
	Revision          int
	RequestID, Action string
	Started, Updated  time.Time
	Running           bool
	Dropped           int64
	Lines             []api.LogLine

	resourceVersion string
	namespaceUID    *types.UID // read at the first write
}

// body is the stored data.
type body struct {
	Dropped int64         `json:"dropped,omitempty"`
	Lines   []api.LogLine `json:"lines"`
}

// Store keeps one ConfigMap per revision in async-helm's own namespace, which tenants
// cannot write.
type Store struct {
	Client    kubernetes.Interface
	Namespace string
	// NamespaceKeep is how many logs one namespace keeps (DefaultNamespaceKeep when 0).
	NamespaceKeep int
}

// ObjectName is the ConfigMap of a revision's log: a hash, as namespace and release
// together may be longer than a name.
func ObjectName(namespace, name string, revision int) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name + "/" + strconv.Itoa(revision)))
	return namePrefix + hex.EncodeToString(sum[:16])
}

// Write stores r: created on its first write, updated after (a record left by an earlier
// attempt at the same revision is overwritten).
func (s *Store) Write(ctx context.Context, r *Record) error {
	if r.namespaceUID == nil {
		ns, err := s.namespace(ctx, r.Namespace)
		if err != nil {
			return err
		}
		var uid types.UID
		if ns != nil {
			uid = ns.UID
		}
		r.namespaceUID = &uid
	}
	cm, err := encode(s.Namespace, r)
	if err != nil {
		return err
	}
	cms := s.Client.CoreV1().ConfigMaps(s.Namespace)
	if r.resourceVersion == "" {
		got, err := cms.Create(ctx, cm, metav1.CreateOptions{})
		if err == nil {
			r.resourceVersion = got.ResourceVersion
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("action log %s: %w", cm.Name, err)
		}
	}
	// Another executor of this revision (a lost lease) may have written meanwhile: the
	// one running now overwrites.
	for attempt := 0; attempt < 3; attempt++ {
		if r.resourceVersion == "" {
			cur, err := cms.Get(ctx, cm.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("action log %s: %w", cm.Name, err)
			}
			r.resourceVersion = cur.ResourceVersion
		}
		cm.ResourceVersion = r.resourceVersion
		got, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err == nil {
			r.resourceVersion = got.ResourceVersion
			return nil
		}
		r.resourceVersion = ""
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("action log %s: %w", cm.Name, err)
		}
	}
	return fmt.Errorf("action log %s: conflicts on every update", cm.Name)
}

func encode(namespace string, r *Record) (*corev1.ConfigMap, error) {
	data, err := json.Marshal(body{Dropped: r.Dropped, Lines: r.Lines})
	if err != nil {
		return nil, fmt.Errorf("action log: %w", err)
	}
	state := stateEnded
	if r.Running {
		state = stateRunning
	}
	labels := map[string]string{LabelNamespace: r.Namespace, LabelRelease: r.Name, LabelRevision: strconv.Itoa(r.Revision)}
	if r.namespaceUID != nil {
		labels[LabelNamespaceUID] = string(*r.namespaceUID)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: ObjectName(r.Namespace, r.Name, r.Revision), Namespace: namespace, Labels: labels,
			Annotations: map[string]string{
				annotationRequestID: r.RequestID, annotationAction: r.Action, annotationState: state,
				annotationStarted: r.Started.UTC().Format(time.RFC3339Nano),
				annotationUpdated: r.Updated.UTC().Format(time.RFC3339Nano),
			},
		},
		Data: map[string]string{dataKey: string(data)},
	}, nil
}

// Get reads one revision's log (release.ErrNotFound when there is none).
func (s *Store) Get(ctx context.Context, namespace, name string, revision int) (*Record, error) {
	cm, err := s.Client.CoreV1().ConfigMaps(s.Namespace).Get(ctx, ObjectName(namespace, name, revision), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: no log of %s/%s revision %d", release.ErrNotFound, namespace, name, revision)
	}
	if err != nil {
		return nil, fmt.Errorf("action log of %s/%s revision %d: %w", namespace, name, revision, err)
	}
	ns, err := s.namespace(ctx, namespace)
	if err != nil {
		return nil, err
	}
	if !owns(ns, cm) {
		return nil, fmt.Errorf("%w: no log of %s/%s revision %d", release.ErrNotFound, namespace, name, revision)
	}
	return decode(cm, namespace, name)
}

// namespace is the namespace so named now (nil when there is none).
func (s *Store) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := s.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("action logs of namespace %s: %w", name, err)
	}
	return ns, nil
}

// owns tells whether namespace ns owns log cm: the one whose UID the log carries (a log
// written before logs carried UIDs is no namespace's). A namespace that is gone (nil) has no
// new owner: its logs stay readable until pruned.
func owns(ns *corev1.Namespace, cm *corev1.ConfigMap) bool {
	uid, keyed := cm.Labels[LabelNamespaceUID]
	return ns == nil || keyed && uid == string(ns.UID)
}

// Latest reads the most recently started log of a release.
func (s *Store) Latest(ctx context.Context, namespace, name string) (*Record, error) {
	cms, err := s.list(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	ns, err := s.namespace(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for i := range cms {
		if owns(ns, &cms[i]) {
			return decode(&cms[i], namespace, name)
		}
	}
	return nil, fmt.Errorf("%w: no log of %s/%s", release.ErrNotFound, namespace, name)
}

// list is a release's logs (at most maxListed), most recently started first.
func (s *Store) list(ctx context.Context, namespace, name string) ([]corev1.ConfigMap, error) {
	// A name that is no label value (a caller's "a,b" would widen the selector) has no log.
	sel, err := labels.ValidatedSelectorFromSet(labels.Set{LabelNamespace: namespace, LabelRelease: name})
	if err != nil {
		return nil, nil
	}
	l, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String(), Limit: maxListed})
	if err != nil {
		return nil, fmt.Errorf("action logs of %s/%s: %w", namespace, name, err)
	}
	items := l.Items
	sort.SliceStable(items, func(i, j int) bool {
		return started(&items[i]).After(started(&items[j]))
	})
	return items, nil
}

func started(cm *corev1.ConfigMap) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, cm.Annotations[annotationStarted])
	return t
}

// Prune deletes a release's logs beyond the keep most recently started.
func (s *Store) Prune(ctx context.Context, namespace, name string, keep int) error {
	if keep <= 0 {
		keep = DefaultKeep
	}
	cms, err := s.list(ctx, namespace, name)
	if err != nil {
		return err
	}
	var errs []error
	for i := keep; i < len(cms); i++ {
		errs = append(errs, s.delete(ctx, &cms[i]))
	}
	if len(cms) <= 1 {
		// A release's first log: only a new release name grows the namespace's logs.
		errs = append(errs, s.pruneNamespace(ctx, namespace))
	}
	return errors.Join(errs...)
}

// pruneNamespace deletes a namespace's logs beyond the NamespaceKeep most recently started.
func (s *Store) pruneNamespace(ctx context.Context, namespace string) error {
	keep := cmp.Or(s.NamespaceKeep, DefaultNamespaceKeep)
	sel, err := labels.ValidatedSelectorFromSet(labels.Set{LabelNamespace: namespace})
	if err != nil {
		return nil
	}
	type kept struct {
		name    string
		uid     types.UID
		started time.Time
	}
	var all []kept
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: maxListed}
	for {
		l, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("action logs of namespace %s: %w", namespace, err)
		}
		for i := range l.Items {
			all = append(all, kept{l.Items[i].Name, l.Items[i].UID, started(&l.Items[i])})
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	if len(all) <= keep {
		return nil
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].started.After(all[j].started) })
	var errs []error
	for _, k := range all[keep:] {
		cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.name, UID: k.uid}}
		errs = append(errs, s.delete(ctx, &cm))
	}
	return errors.Join(errs...)
}

// PruneOlder deletes the logs last written before cutoff, and says how many.
func (s *Store) PruneOlder(ctx context.Context, cutoff time.Time) (int, error) {
	opts := metav1.ListOptions{LabelSelector: LabelRelease, Limit: 200}
	n := 0
	for {
		l, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, opts)
		if err != nil {
			return n, fmt.Errorf("action logs: %w", err)
		}
		for i := range l.Items {
			t, err := time.Parse(time.RFC3339Nano, l.Items[i].Annotations[annotationUpdated])
			if err == nil && !t.Before(cutoff) {
				continue
			}
			if err := s.delete(ctx, &l.Items[i]); err != nil {
				return n, err
			}
			n++
		}
		if opts.Continue = l.Continue; opts.Continue == "" {
			return n, nil
		}
	}
}

func (s *Store) delete(ctx context.Context, cm *corev1.ConfigMap) error {
	err := s.Client.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, cm.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("action log %s: %w", cm.Name, err)
	}
	return nil
}

// decode reads a stored log, checking that it is the release's asked for.
func decode(cm *corev1.ConfigMap, namespace, name string) (*Record, error) {
	if cm.Labels[LabelNamespace] != namespace || cm.Labels[LabelRelease] != name {
		return nil, fmt.Errorf("%w: no log of %s/%s", release.ErrNotFound, namespace, name)
	}
	raw := cm.Data[dataKey]
	if len(raw) > maxStoredBytes {
		return nil, fmt.Errorf("action log %s: %d bytes, over %d", cm.Name, len(raw), maxStoredBytes)
	}
	var b body
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		return nil, fmt.Errorf("action log %s: %w", cm.Name, err)
	}
	r := &Record{Namespace: namespace, Name: name, RequestID: cm.Annotations[annotationRequestID],
		Action: cm.Annotations[annotationAction], Running: cm.Annotations[annotationState] == stateRunning,
		Dropped: b.Dropped, Lines: b.Lines, resourceVersion: cm.ResourceVersion}
	r.Revision, _ = strconv.Atoi(cm.Labels[LabelRevision])
	r.Started = started(cm)
	r.Updated, _ = time.Parse(time.RFC3339Nano, cm.Annotations[annotationUpdated])
	return r, nil
}
