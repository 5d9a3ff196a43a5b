package sweeper

import (
	"strings"
	"testing"
	"time"
)

// From the record: what does not decode, is overdue or has no event fails before its event
// is checked; a refused event fails; a started revision re-sent within Grace is left;
// anything else is sent again, its claim dated now.
func TestDecideRecord(t *testing.T) {
	for _, tc := range []struct {
		name     string
		queued   bool
		age      time.Duration // since the clock's start
		sent     time.Duration // since the last re-send (0: never)
		r        record
		checked  bool
		want     action
		inReason string
	}{
		{"undecodable", true, time.Minute, 0, record{undecodable: true, hasEvent: true}, false, fail, "does not decode"},
		{"queued past the deadline", true, time.Hour, 0, record{hasEvent: true}, false, fail, "it never started"},
		{"started past the deadline", false, time.Hour, 0, record{hasEvent: true}, false, fail, "its executor was lost"},
		{"no stored event", false, 10 * time.Minute, 0, record{}, false, fail, "no stored request to send again"},
		{"an event, not checked yet", true, 10 * time.Minute, 0, record{hasEvent: true}, false, read, ""},
		{"refused", true, 10 * time.Minute, 0, record{hasEvent: true, refusal: "its stored request is not submit's"}, true, fail, "was not sent again: its stored request is not submit's"},
		{"queued, checked", true, 10 * time.Minute, 0, record{hasEvent: true}, true, resend, ""},
		{"started, re-sent within grace", false, 10 * time.Minute, 30 * time.Second, record{hasEvent: true}, true, leave, ""},
		{"started, re-sent past grace", false, 10 * time.Minute, time.Minute, record{hasEvent: true}, true, resend, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rev := pending(tc.queued)
			now := t0.Add(tc.age)
			if tc.sent > 0 {
				rev.SentAt = now.Add(-tc.sent)
			}
			d := cfg.clocked(rev, now, t0)
			d.since = now.Add(-time.Hour)
			v := cfg.decideRecord(rev, tc.r, d, tc.checked)
			if v.action != tc.want || !strings.Contains(v.reason, tc.inReason) {
				t.Errorf("decideRecord: %+v, want %v with %q", v, tc.want, tc.inReason)
			}
			if v.action == resend && !v.at.Equal(now) {
				t.Errorf("claim dated %v, want %v", v.at, now)
			}
		})
	}
}
