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
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// Labels and annotations of a log's ConfigMap.
const (
	LabelNamespace = "async-helm.io/log-namespace"
	LabelRelease   = "async-helm.io/log-release"
	LabelRevision  = "async-helm.io/log-revision"
	// LabelNamespaceUID: a log is answered only in the namespace it ran in, not one made again.
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
	// DefaultNamespaceKeep bounds a namespace's logs (new release names would grow them).
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

type body struct {
	Dropped int64         `json:"dropped,omitempty"`
	Lines   []api.LogLine `json:"lines"`
}

// Store keeps one ConfigMap per revision in async-helm's own namespace (tenants cannot write).
type Store struct {
	Client    kubernetes.Interface
	Namespace string
	// NamespaceKeep is how many logs one namespace keeps (DefaultNamespaceKeep when 0).
	NamespaceKeep int
}

// ObjectName is the ConfigMap of a revision's log: a hash (namespace and release may be too long).
func ObjectName(namespace, name string, revision int) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name + "/" + strconv.Itoa(revision)))
	return namePrefix + hex.EncodeToString(sum[:16])
}

// Write stores r: created on its first write, updated after (an earlier attempt's too).
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
	// Another executor of this revision (a lost lease) may have written: this one overwrites.
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

// owns tells whether namespace ns owns log cm: the one whose UID it carries (none: no
// namespace's). A namespace that is gone (nil) has no new owner: its logs stay readable.
func owns(ns *corev1.Namespace, cm metav1.Object) bool {
	uid, keyed := cm.GetLabels()[LabelNamespaceUID]
	return ns == nil || keyed && uid == string(ns.UID)
}

// Latest reads the most recently started log of a release.
func (s *Store) Latest(ctx context.Context, namespace, name string) (*Record, error) {
	heads, err := s.logs(ctx, labels.Set{LabelNamespace: namespace, LabelRelease: name})
	if err != nil {
		return nil, err
	}
	ns, err := s.namespace(ctx, namespace)
	if err != nil {
		return nil, err
	}
	for i := range heads {
		if owns(ns, &heads[i]) {
			rev, _ := strconv.Atoi(heads[i].Labels[LabelRevision])
			return s.Get(ctx, namespace, name, rev)
		}
	}
	return nil, fmt.Errorf("%w: no log of %s/%s", release.ErrNotFound, namespace, name)
}

// logs are the logs set selects, most recently started first (none when a value is no
// label value: a caller's "a,b" would widen the selector).
func (s *Store) logs(ctx context.Context, set labels.Set) ([]metav1.PartialObjectMetadata, error) {
	sel, err := labels.ValidatedSelectorFromSet(set)
	if err != nil {
		return nil, nil
	}
	var all []metav1.PartialObjectMetadata
	opts := metav1.ListOptions{LabelSelector: sel.String(), Limit: maxListed}
	for {
		l, err := s.heads(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("action logs of %s: %w", sel, err)
		}
		all = append(all, l.Items...)
		if opts.Continue = l.Continue; opts.Continue == "" {
			break
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return started(&all[i]).After(started(&all[j])) })
	return all, nil
}

// heads lists one page of logs, their metadata only (a log's data is up to 1 MiB).
func (s *Store) heads(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	var l metav1.PartialObjectMetadataList
	if rc, _ := s.Client.CoreV1().RESTClient().(*rest.RESTClient); rc != nil {
		raw, err := rc.Get().Namespace(s.Namespace).Resource("configmaps").VersionedParams(&opts, scheme.ParameterCodec).
			SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		return &l, json.Unmarshal(raw, &l)
	}
	typed, err := s.Client.CoreV1().ConfigMaps(s.Namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	l.ListMeta = typed.ListMeta
	for i := range typed.Items {
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: typed.Items[i].ObjectMeta})
	}
	return &l, nil
}

func started(m metav1.Object) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, m.GetAnnotations()[annotationStarted])
	return t
}

// Prune deletes a release's logs past keep, and at its first its namespace's past NamespaceKeep.
func (s *Store) Prune(ctx context.Context, namespace, name string, keep int) error {
	if keep <= 0 {
		keep = DefaultKeep
	}
	heads, err := s.logs(ctx, labels.Set{LabelNamespace: namespace, LabelRelease: name})
	if err != nil {
		return err
	}
	errs := []error{s.deleteAll(ctx, heads[min(keep, len(heads)):])}
	if len(heads) <= 1 {
		all, err := s.logs(ctx, labels.Set{LabelNamespace: namespace})
		errs = append(errs, err, s.deleteAll(ctx, all[min(cmp.Or(s.NamespaceKeep, DefaultNamespaceKeep), len(all)):]))
	}
	return errors.Join(errs...)
}

func (s *Store) deleteAll(ctx context.Context, heads []metav1.PartialObjectMetadata) error {
	var errs []error
	for i := range heads {
		errs = append(errs, s.delete(ctx, &heads[i]))
	}
	return errors.Join(errs...)
}

// PruneOlder deletes the logs last written before cutoff, and says how many.
func (s *Store) PruneOlder(ctx context.Context, cutoff time.Time) (int, error) {
	opts := metav1.ListOptions{LabelSelector: LabelRelease, Limit: 200}
	n := 0
	for {
		l, err := s.heads(ctx, opts)
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

func (s *Store) delete(ctx context.Context, m *metav1.PartialObjectMetadata) error {
	err := s.Client.CoreV1().ConfigMaps(s.Namespace).Delete(ctx, m.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &m.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("action log %s: %w", m.Name, err)
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
