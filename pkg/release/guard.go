package release

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kblabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// SecretsDriver is Helm's Secrets driver with every read through the guarded decode
// (Helm's Get dereferences nil on a payload that does not decode, its List and Query
// decompress without bound): Get and Delete answer ErrUndecodable for such a record, List
// and Query skip it. Writes are Helm's own.
type SecretsDriver struct {
	*driver.Secrets
	impl typedcorev1.SecretInterface
	// Shared, when set, is the budget of a read over several namespaces (one driver each):
	// their Lists and Queries draw on it instead of a budget each.
	Shared *ReadBudget
}

// GuardedSecrets is the driver Helm's actions should use on the Secrets of a namespace.
// Set Log on the result as on Helm's own driver.
func GuardedSecrets(si typedcorev1.SecretInterface) *SecretsDriver {
	return &SecretsDriver{Secrets: driver.NewSecrets(si), impl: si}
}

// Get reads and decodes one record.
func (d *SecretsDriver) Get(key string) (*helmrelease.Release, error) {
	rls, _, err := d.getRecord(key)
	return rls, err
}

// getRecord is Get with the record's apply_method (Helm v4's), from the same read.
func (d *SecretsDriver) getRecord(key string) (*helmrelease.Release, string, error) {
	obj, err := d.impl.Get(context.Background(), key, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", driver.ErrReleaseNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("get: failed to get %q: %w", key, err)
	}
	rls, method, _, err := decodeRecord(obj.Data["release"], recordBound, obj.Namespace)
	if err == nil {
		err = bindToSecret(rls, obj)
	}
	if err != nil {
		return nil, "", fmt.Errorf("get %q: %w", key, err)
	}
	rls.Labels = withoutSystemLabels(obj.Labels)
	return rls, method, nil
}

// bindToSecret refuses, as undecodable, a payload that names another namespace, release or
// version than the Secret it is in (Helm names its Secret from its payload): the tenant's
// payload naming namespace "victim" would have async-helm read and copy victim's records.
// A payload with no namespace is taken to be in the Secret's.
func bindToSecret(rls *helmrelease.Release, obj metav1.Object) error {
	var bound bool
	rls.Namespace, bound = BoundToSecret(obj, rls.Namespace, rls.Name, rls.Version)
	if !bound {
		return fmt.Errorf("%w: the record names %s/%s v%d, not the Secret %s/%s it is in",
			ErrUndecodable, rls.Namespace, rls.Name, rls.Version, obj.GetNamespace(), obj.GetName())
	}
	return nil
}

// BoundToSecret is bindToSecret's rule for a head decoded some other way (reader's
// limitInfo list): namespace is the record's (the Secret's when the payload names none);
// bound is false when the payload names another Secret than obj.
func BoundToSecret(obj metav1.Object, payloadNamespace, name string, version int) (namespace string, bound bool) {
	if payloadNamespace == "" {
		payloadNamespace = obj.GetNamespace()
	}
	return payloadNamespace, payloadNamespace == obj.GetNamespace() && obj.GetName() == SecretName(name, version)
}

// List decodes every release secret, skipping those that do not decode.
func (d *SecretsDriver) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	rels, err := d.decodeAll(SelectorReleaseSecrets)
	if err != nil {
		return nil, fmt.Errorf("list: failed to list: %w", err)
	}
	out := rels[:0]
	for _, r := range rels {
		if filter(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Query decodes the release secrets with labels, skipping those that do not decode.
func (d *SecretsDriver) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	for _, v := range labels {
		if errs := validation.IsValidLabelValue(v); len(errs) != 0 {
			return nil, fmt.Errorf("invalid label value: %q: %s", v, strings.Join(errs, "; "))
		}
	}
	rels, err := d.decodeAll(kblabels.Set(labels).AsSelector().String())
	if err != nil {
		return nil, fmt.Errorf("query: failed to query with labels: %w", err)
	}
	if len(rels) == 0 {
		return nil, driver.ErrReleaseNotFound
	}
	return rels, nil
}

// MaxReadBytes and MaxReadNodes bound the decoded records one List or Query keeps: Helm
// keeps every record a read returns, and a tenant's few small Secrets that each expand to
// a record's bound would add up to gigabytes.
const (
	MaxReadBytes = 4 * MaxRecordBytes
	MaxReadNodes = 4 * MaxRecordNodes
)

// ReadBudget is MaxReadBytes and MaxReadNodes for one read, or for several reads together
// (Shared: one request that lists many namespaces holds one budget, not one each). A record
// past what is left is not decoded, and counted (Over): a read that must answer every
// record (submit's) is refused then, whichever namespace spent the budget.
type ReadBudget struct {
	mu    sync.Mutex
	bound readBudget
	spent readBudget
	over  int // records left out past the bound
}

// NewReadBudgetOf is 1/n of one read's budget (a read slot's share of submit's memory).
func NewReadBudgetOf(n int) *ReadBudget {
	return &ReadBudget{bound: readBudget{bytes: MaxReadBytes / n, nodes: MaxReadNodes / n}}
}

// Over is how many records the reads on b left out past its bound.
func (b *ReadBudget) Over() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.over
}

func (d *SecretsDriver) decodeAll(selector string) ([]*helmrelease.Release, error) {
	b := d.Shared
	if b == nil {
		b = NewReadBudgetOf(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return d.readWithin(selector, b)
}

// readWithin decodes the records selector lists, read in pages, within b, and logs once
// the records it left out past it.
func (d *SecretsDriver) readWithin(selector string, b *ReadBudget) ([]*helmrelease.Release, error) {
	var out []*helmrelease.Release
	over := 0
	err := eachPage(selector, func(opts metav1.ListOptions) (string, error) {
		list, err := d.impl.List(context.Background(), opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			item := &list.Items[i]
			// What is left of the read's budget (spent where not positive), within one record's.
			left := readBudget{bytes: b.bound.bytes - b.spent.bytes, nodes: b.bound.nodes - b.spent.nodes}
			bound := readBudget{bytes: min(left.bytes, MaxRecordBytes), nodes: min(left.nodes, MaxRecordNodes)}
			if bound.bytes <= 0 || bound.nodes <= 0 {
				over++
				continue
			}
			rls, _, cost, err := decodeRecord(item.Data["release"], bound, item.Namespace)
			if errors.Is(err, errTooLarge) && bound != recordBound {
				over++ // over what is left, not necessarily the record's bound
				continue
			}
			if err == nil {
				err = bindToSecret(rls, item)
			}
			if err != nil {
				d.Log("skipping release record %s/%s: %v", item.Namespace, item.Name, err)
				continue
			}
			rls.Labels = item.Labels // as Helm's List and Query keep them
			out = append(out, rls)
			b.spent.bytes, b.spent.nodes = b.spent.bytes+cost.bytes, b.spent.nodes+cost.nodes
		}
		return list.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	if b.over += over; over > 0 {
		d.Log("skipping %d release records of %q: the read passed its budget of %d decoded bytes, %d JSON values",
			over, selector, b.bound.bytes, b.bound.nodes)
	}
	return out, nil
}

// Delete reads the record (guarded) before deleting it, as Helm's does.
func (d *SecretsDriver) Delete(key string) (*helmrelease.Release, error) {
	rls, err := d.Get(key)
	if err != nil {
		return nil, err
	}
	if err := d.impl.Delete(context.Background(), key, metav1.DeleteOptions{}); err != nil {
		return rls, fmt.Errorf("delete %q: %w", key, err)
	}
	return rls, nil
}

func withoutSystemLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range driver.GetSystemLabels() {
		delete(out, k)
	}
	return out
}
