// Package events is the CloudEvents contract of async-helm: event types, extensions and
// payloads between submit, executor, notifier and subscribers, and a checked sender.
package events

import (
	"fmt"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// Event types. Reverse-DNS; see docs/design.md.
const (
	// Requests from pipelines to submit; payload api.ReleaseRequest.
	TypeInstallRequested = "dev.asynchelm.release.install.requested"
	TypeUpgradeRequested = "dev.asynchelm.release.upgrade.requested"
	// Accepted requests from submit to executor; payload Action.
	TypeInstallAccepted = "dev.asynchelm.release.install.accepted"
	TypeUpgradeAccepted = "dev.asynchelm.release.upgrade.accepted"
	// TypeUninstallAccepted: the latest revision is marked uninstalling; TypeRollbackAccepted:
	// revision N+1 is reserved pending-rollback (docs/design.md, "Uninstall and rollback").
	TypeUninstallAccepted = "dev.asynchelm.release.uninstall.accepted"
	TypeRollbackAccepted  = "dev.asynchelm.release.rollback.accepted"
	// TypeStatusPrefix + status (e.g. "deployed") from notifier; payload StatusChange.
	TypeStatusPrefix = "dev.asynchelm.release.status."
	// StatusUninstalled is the status of the event sent when an uninstalled release's last
	// record is deleted (Helm purges the records, so no secret ever carries it).
	StatusUninstalled = "uninstalled"
)

// acceptedTypes maps each action to the type of its accepted event.
var acceptedTypes = map[release.Action]string{
	release.ActionInstall:   TypeInstallAccepted,
	release.ActionUpgrade:   TypeUpgradeAccepted,
	release.ActionUninstall: TypeUninstallAccepted,
	release.ActionRollback:  TypeRollbackAccepted,
}

// AcceptedType is the type of the accepted event of an action ("" for an unknown one).
func AcceptedType(a release.Action) string { return acceptedTypes[a] }

// Extensions every async-helm event carries.
const (
	ExtRevision  = "helmrevision"
	ExtRequestID = "requestid"
)

// Sources.
const (
	SourceSubmit   = "/async-helm/submit"
	SourceNotifier = "/async-helm/notifier"
)

// Options of a Helm action, as the executor runs it.
type Options struct {
	Timeout     time.Duration `json:"timeout"`
	Wait        bool          `json:"wait,omitempty"`
	WaitForJobs bool          `json:"waitForJobs,omitempty"`
	Atomic      bool          `json:"atomic,omitempty"`
	Description string        `json:"description,omitempty"`
	// Retries and Remediation (api.ReleaseRequest's): attempts after a failed install or
	// upgrade, and what runs after the last one. Absent in older events: 0 and none.
	Retries     int    `json:"retries,omitempty"`
	Remediation string `json:"remediation,omitempty"`
	// ServerSide ("", "true", "false", "auto") and ForceConflicts: the apply method under
	// the executor's Helm v4 engine (api.ServerSide). Absent in older events: client-side.
	ServerSide     string `json:"serverSide,omitempty"`
	ForceConflicts bool   `json:"forceConflicts,omitempty"`
	// ReuseValues (upgrades): the last release's values under this action's.
	ReuseValues bool `json:"reuseValues,omitempty"`
	// NoHooks (uninstalls): run no delete hook (Helm's --no-hooks).
	NoHooks bool `json:"noHooks,omitempty"`
}

// Caller is who asked; the executor acts as this identity once impersonation is on.
type Caller struct {
	User   string              `json:"user,omitempty"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
}

// Action is the payload of an accepted event: everything the executor needs.
type Action struct {
	Action     release.Action `json:"action"`
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	Revision   int            `json:"revision"`
	SecretName string         `json:"secretName"`
	Chart      chartref.Ref   `json:"chart"`
	Values     map[string]any `json:"values,omitempty"`
	// ValuesFrom are references only, never values: the executor reads them as the caller
	// when it runs and merges them, in order, before Values.
	ValuesFrom []valuesfrom.Ref `json:"valuesFrom,omitempty"`
	// ReuseChart: upgrade with the chart of the current revision (no chart named).
	ReuseChart bool    `json:"reuseChart,omitempty"`
	Options    Options `json:"options"`
	Caller     Caller  `json:"caller"`
	RequestID  string  `json:"requestId"`

	// ChartDigest is the chart submit validated: the archive's sha256, or for ReuseChart
	// release.ChartDigest of the deployed revision's chart. The executor runs only that chart.
	ChartDigest string `json:"chartDigest,omitempty"`

	// RollbackTo is the revision a rollback returns to (Helm's rollback version).
	RollbackTo int `json:"rollbackTo,omitempty"`

	// RollbackPin is the record a rollback of this request may restore (a rollback's
	// RollbackTo; an atomic upgrade's or a rollback remediation's base), pinned by submit
	// under this payload's signature. Absent in older events.
	RollbackPin *release.Pin `json:"rollbackPin,omitempty"`

	// ValuesPin is the record an upgrade that reuses values takes them from (its revision
	// and release.ConfigDigest), pinned by submit under this payload's signature: the
	// executor runs the upgrade only with those values. Absent in older events.
	ValuesPin *release.Pin `json:"valuesPin,omitempty"`

	// Attempt is not part of the payload: the executor sets it ("2 of 4") on the action of
	// each attempt of a request with retries, for its progress.
	Attempt string `json:"-"`

	// BoundSecretUID is not part of the payload: the receiver sets it from the delivery's
	// verified binding (BoundSecret), "" when the delivery carries none.
	BoundSecretUID types.UID `json:"-"`
}

// StatusChange is the payload of a status event.
type StatusChange struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Revision     int    `json:"revision"`
	Status       string `json:"status"`
	Chart        string `json:"chart,omitempty"`
	ChartVersion string `json:"chartVersion,omitempty"`
	AppVersion   string `json:"appVersion,omitempty"`
	// Reason is Helm's info.description, set for failed revisions. Reason, LogTail and the
	// chart fields are bounded (Bounded): an event carries a few KiB of a record's text.
	Reason    string `json:"reason,omitempty"`
	RequestID string `json:"requestId,omitempty"`
	// LogTail is the end of the action's log, set for failed revisions that have one
	// (docs/design.md, "The action's log").
	LogTail string `json:"logTail,omitempty"`
}

// Subject is the subject of every event about a release.
func Subject(namespace, name string) string { return namespace + "/" + name }

// RequestedAction maps a request event type to its action.
func RequestedAction(eventType string) (release.Action, bool) {
	switch eventType {
	case TypeInstallRequested:
		return release.ActionInstall, true
	case TypeUpgradeRequested:
		return release.ActionUpgrade, true
	}
	return "", false
}

// NewAccepted builds submit's event for the executor; its id is the request id.
func NewAccepted(a Action) (cloudevents.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID(a.RequestID)
	e.SetSource(SourceSubmit)
	typ := AcceptedType(a.Action)
	if typ == "" {
		return e, fmt.Errorf("no accepted event for action %q", a.Action)
	}
	e.SetType(typ)
	e.SetSubject(Subject(a.Namespace, a.Name))
	e.SetExtension(ExtRevision, a.Revision)
	e.SetExtension(ExtRequestID, a.RequestID)
	return e, e.SetData(cloudevents.ApplicationJSON, a)
}

// ParseAccepted reads an accepted event and checks it is consistent.
func ParseAccepted(e cloudevents.Event) (Action, error) {
	var a Action
	var want release.Action
	for action, typ := range acceptedTypes {
		if e.Type() == typ {
			want = action
		}
	}
	if want == "" {
		return a, fmt.Errorf("unexpected event type %q", e.Type())
	}
	if err := e.DataAs(&a); err != nil {
		return a, fmt.Errorf("decode %s payload: %w", e.Type(), err)
	}
	switch {
	case a.Action != want:
		return a, fmt.Errorf("payload action %q does not match type %s", a.Action, e.Type())
	case a.Name == "" || a.Namespace == "" || a.Revision < 1:
		return a, fmt.Errorf("payload lacks name, namespace or revision")
	case a.SecretName != release.SecretName(a.Name, a.Revision):
		return a, fmt.Errorf("secret name %q does not match revision %d of %s", a.SecretName, a.Revision, a.Name)
	case e.Subject() != Subject(a.Namespace, a.Name):
		return a, fmt.Errorf("subject %q does not match payload", e.Subject())
	case !IsRequestID(a.RequestID) || e.ID() != a.RequestID || fmt.Sprint(e.Extensions()[ExtRequestID]) != a.RequestID:
		return a, fmt.Errorf("event id %.64q, request id extension %.64q and payload request id %.64q are not one request id",
			e.ID(), fmt.Sprint(e.Extensions()[ExtRequestID]), a.RequestID)
	case a.Action == release.ActionRollback && a.RollbackTo < 0:
		return a, fmt.Errorf("rollback to revision %d", a.RollbackTo)
	}
	if err := a.Caller.Validate(); err != nil {
		return a, err
	}
	return a, nil
}

// IsRequestID reports whether id has the form of a request id: what submit mints is a label
// value (it labels the release record), so never empty, at most 63 characters, no newline.
func IsRequestID(id string) bool {
	return id != "" && len(validation.IsValidLabelValue(id)) == 0
}

// Validate refuses a caller the executor must not act as: a member of auth.PrivilegedGroup,
// even when a validly signed event names it (impersonating it would make the executor's
// impersonation right a cluster-admin right). An empty caller is a trusted local run
// without authentication: the executor acts as itself.
func (c Caller) Validate() error {
	if slices.Contains(c.Groups, auth.PrivilegedGroup) {
		return fmt.Errorf("caller %q is in group %s, which async-helm never impersonates", c.User, auth.PrivilegedGroup)
	}
	return nil
}

// StatusEventID is stable for one transition, so redeliveries and restarts can be
// de-duplicated, and differs between incarnations of a revision: after an uninstall and a
// new install, revision 1 is another request (another request id), so its events are not
// taken for the old ones. Revisions made without async-helm carry no request id.
func StatusEventID(namespace, name string, revision int, status, requestID string) string {
	id := fmt.Sprintf("%s/%s/v%d/%s", namespace, name, revision, status)
	if requestID != "" {
		id += "/" + requestID
	}
	return id
}

// NewStatus builds the notifier's event for one transition, its text bounded (Bounded).
func NewStatus(s StatusChange) (cloudevents.Event, error) {
	s = s.Bounded()
	e := cloudevents.NewEvent()
	e.SetID(StatusEventID(s.Namespace, s.Name, s.Revision, s.Status, s.RequestID))
	e.SetSource(SourceNotifier)
	e.SetType(TypeStatusPrefix + s.Status)
	e.SetSubject(Subject(s.Namespace, s.Name))
	e.SetExtension(ExtRevision, s.Revision)
	if s.RequestID != "" {
		e.SetExtension(ExtRequestID, s.RequestID)
	}
	return e, e.SetData(cloudevents.ApplicationJSON, s)
}

// ParseStatus reads a status event.
func ParseStatus(e cloudevents.Event) (StatusChange, error) {
	var s StatusChange
	if !strings.HasPrefix(e.Type(), TypeStatusPrefix) {
		return s, fmt.Errorf("unexpected event type %q", e.Type())
	}
	return s, e.DataAs(&s)
}

// ParseRequested reads a pipeline's request event.
func ParseRequested(e cloudevents.Event) (release.Action, api.ReleaseRequest, error) {
	var r api.ReleaseRequest
	a, ok := RequestedAction(e.Type())
	if !ok {
		return "", r, fmt.Errorf("unexpected event type %q (want %s or %s)", e.Type(), TypeInstallRequested, TypeUpgradeRequested)
	}
	if err := e.DataAs(&r); err != nil {
		return "", r, fmt.Errorf("decode %s payload: %w", e.Type(), err)
	}
	return a, r, nil
}

// TypeReserved is submit's reply to a request event: the reserved release secret (as the
// HTTP API's 201 body). Nothing subscribes to it, so a broker routing the reply is harmless.
const TypeReserved = "dev.asynchelm.release.reserved"
