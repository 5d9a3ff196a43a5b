package events

import (
	"encoding/json"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Retries and remediation travel in the accepted event; an event of an older submit
// (without them) decodes as 0 retries and no remediation, and a new one is unchanged for
// requests that ask for neither.
func TestAcceptedRetriesAndRemediation(t *testing.T) {
	a := action()
	a.Options.Retries, a.Options.Remediation = 3, "rollback"
	e, err := NewAccepted(a)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseAccepted(e)
	if err != nil || got.Options.Retries != 3 || got.Options.Remediation != "rollback" {
		t.Fatalf("round trip: %+v, %v", got.Options, err)
	}

	old := signed(t) // built from a payload without the fields
	var raw map[string]any
	if err := json.Unmarshal(old.Data(), &raw); err != nil {
		t.Fatal(err)
	}
	opts, _ := raw["options"].(map[string]any)
	if _, ok := opts["retries"]; ok || opts == nil {
		t.Errorf("options without retries carry the key: %v", raw["options"])
	}
	delete(opts, "remediation")
	if err := old.SetData(cloudevents.ApplicationJSON, raw); err != nil {
		t.Fatal(err)
	}
	got, err = ParseAccepted(old)
	if err != nil || got.Options.Retries != 0 || got.Options.Remediation != "" {
		t.Fatalf("older event: %+v, %v", got.Options, err)
	}
}
