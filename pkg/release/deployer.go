package release

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/signing"
)

// DataDeployer is the data entry of a release Secret that says who wrote its hooks: the keyed
// digest of the identity the action ran as and of the hooks it wrote, sealed for this Secret
// (namespace, name, UID). The tenant may rewrite the record, not the seal: an uninstall runs
// its delete hooks only as that identity, and only while they are the hooks sealed.
const DataDeployer = "async-helm.io.deployer"

// MaxDeployerBytes bounds the entry read back (it is tenant input until it verifies).
const MaxDeployerBytes = 64 << 10

// ErrDeployerSeal: the entry does not verify (absent, malformed, for another Secret, or
// not sealed with this key).
var ErrDeployerSeal = errors.New("the record's hooks are not sealed by async-helm")

// Deployer is who an action ran as, as a keyed digest (IdentityDigest: the record is read
// by whoever may read the namespace's Secrets, and the uninstall needs only to compare), and
// the HooksDigest of the hooks its Helm wrote.
type Deployer struct {
	Who   string `json:"who"`
	Hooks string `json:"hooks"`
	Sig   string `json:"sig,omitempty"`
}

// Identity is who an action runs as: the user, uid, groups and extra it impersonates.
type Identity struct {
	User   string              `json:"user"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
}

// IdentityDigest is id's keyed digest: equal for the same identity (groups and each extra's
// values in any order), another for any other name, uid, group or extra; "" without a user
// or key. Without the key it cannot be computed, so it names no one to a reader of records.
func IdentityDigest(key signing.Key, id Identity) string {
	if !key.Set() || id.User == "" {
		return ""
	}
	id.Groups = sortedCopy(id.Groups)
	if len(id.Extra) > 0 {
		extra := make(map[string][]string, len(id.Extra))
		for k, v := range id.Extra {
			extra[k] = sortedCopy(v)
		}
		id.Extra = extra
	}
	text, err := json.Marshal(id) // a map's keys are written sorted
	if err != nil {
		return ""
	}
	return key.Sign(signing.Identity, string(text))
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// SecretRef names the Secret a Deployer entry is sealed for.
type SecretRef struct {
	Namespace, Name string
	UID             types.UID
}

func (r SecretRef) text(body []byte) string {
	return r.Namespace + "\x00" + r.Name + "\x00" + string(r.UID) + "\x00" + string(body)
}

// SealDeployer is the DataDeployer entry of d for the Secret ref.
func SealDeployer(key signing.Key, ref SecretRef, d Deployer) ([]byte, error) {
	if !key.Set() || d.Who == "" || ref.UID == "" {
		return nil, fmt.Errorf("%w: no key, identity or secret uid to seal with", ErrDeployerSeal)
	}
	d.Sig = ""
	body, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode the deployer of %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	d.Sig = key.Sign(signing.Deployer, ref.text(body))
	return json.Marshal(d)
}

// OpenDeployer verifies raw, read from the Secret ref, and answers what it seals.
func OpenDeployer(key signing.Key, ref SecretRef, raw []byte) (*Deployer, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: the record has no %s entry", ErrDeployerSeal, DataDeployer)
	}
	if len(raw) > MaxDeployerBytes {
		return nil, fmt.Errorf("%w: its %s entry has %d bytes, over %d", ErrDeployerSeal, DataDeployer, len(raw), MaxDeployerBytes)
	}
	var d Deployer
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%w: its %s entry does not decode: %v", ErrDeployerSeal, DataDeployer, err)
	}
	sig := d.Sig
	d.Sig = ""
	body, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDeployerSeal, err)
	}
	if d.Who == "" || !key.Verify(signing.Deployer, ref.text(body), sig) {
		return nil, fmt.Errorf("%w: its %s entry does not verify for %s/%s", ErrDeployerSeal, DataDeployer, ref.Namespace, ref.Name)
	}
	d.Sig = sig
	return &d, nil
}

// HooksDigest identifies a record's hooks: sha256 of them without their last run (which
// running them changes); "" when there are none.
func HooksDigest(hooks []*helmrelease.Hook) (string, error) {
	kept := digestedHooks(hooks)
	if len(kept) == 0 {
		return "", nil
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return "", fmt.Errorf("encode hooks: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// digestedHooks are hooks as a digest covers them: no nil entries, no last run.
func digestedHooks(hooks []*helmrelease.Hook) []*helmrelease.Hook {
	var out []*helmrelease.Hook
	for _, h := range hooks {
		if h == nil {
			continue
		}
		c := *h
		c.LastRun = helmrelease.HookExecution{}
		out = append(out, &c)
	}
	return out
}
