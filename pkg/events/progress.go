package events

import (
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/progress"
)

// TypeProgress is the notifier's event about what a pending revision is doing now.
const TypeProgress = "dev.asynchelm.release.progress"

// ProgressChange is the payload of a progress event.
type ProgressChange struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Revision  int               `json:"revision"`
	Progress  progress.Progress `json:"progress"`
}

// NewProgress builds a progress event; its id names the revision and the progress's time.
func NewProgress(c ProgressChange) (cloudevents.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("%s/%s/v%d/progress/%d", c.Namespace, c.Name, c.Revision, c.Progress.Updated.UnixMilli()))
	e.SetSource(SourceNotifier)
	e.SetType(TypeProgress)
	e.SetSubject(Subject(c.Namespace, c.Name))
	e.SetExtension(ExtRevision, c.Revision)
	return e, e.SetData(cloudevents.ApplicationJSON, c)
}
