package notifier

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// A helm CLI record has no chart label: its chart is in the payload (~1 MiB a read), kept by
// the Secret's UID once read (ChartsCached), as Helm reports each revision several times.

// ChartsCached bounds the charts kept by record (a hundred bytes each).
const ChartsCached = 4096

// chartOf is a record's chart as its payload says.
type chartOf struct{ name, version, appVersion string }

// cachedChart is the chart read of the record uid, if kept.
func (s *Service) cachedChart(uid types.UID) (chartOf, bool) {
	if uid == "" || s.charts == nil {
		return chartOf{}, false
	}
	v, _ := s.charts.Get(uid)
	ch, ok := v.(chartOf)
	return ch, ok
}

// describe fills chart and reason: the payload's head is read (at the index's resourceVersion)
// only for a failure's reason or a helm CLI chart not cached; undecodable: the labels only.
func (s *Service) describe(ctx context.Context, rev release.Revision, status string, c *events.StatusChange) error {
	c.Chart, c.ChartVersion, _ = release.ParseChartLabel(rev.Chart)
	if c.Chart != "" && status != "failed" {
		return nil
	}
	if status == "failed" {
		c.Reason = rev.Failure // set when async-helm failed an undecodable record
	} else if ch, ok := s.cachedChart(rev.UID); ok {
		c.Chart, c.ChartVersion, c.AppVersion = ch.name, ch.version, ch.appVersion
		return nil
	}
	head, err := s.Store.Head(ctx, rev.Namespace, rev.SecretName, rev.ResourceVersion)
	if errors.Is(err, release.ErrUndecodable) {
		s.once.Warn(s.Log, "undecodable/"+string(rev.UID),
			"release record does not decode; reported from its labels", "namespace", rev.Namespace, "secret", rev.SecretName, "error", err)
		return nil
	}
	if err != nil || head == nil {
		return err // nil head: deleted meanwhile, what the labels say is all there is
	}
	if name, version, app := head.ChartMeta(); name != "" {
		// Kept as the event carries it (events' bounds): the tenant's text stays with its head.
		b := events.StatusChange{Chart: name, ChartVersion: version, AppVersion: app}.Bounded()
		c.Chart, c.ChartVersion, c.AppVersion = b.Chart, b.ChartVersion, b.AppVersion
		if rev.UID != "" && s.charts != nil {
			s.charts.Add(rev.UID, chartOf{b.Chart, b.ChartVersion, b.AppVersion})
		}
	}
	if status == "failed" && head.Description() != "" {
		c.Reason = head.Description()
	}
	return nil
}
