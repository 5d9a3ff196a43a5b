package diff

import (
	"fmt"
	"io"
	"strings"
)

var verbs = map[string]string{Add: "has been added", Modify: "has changed", Remove: "has been removed"}

// WriteText prints changes as helm-diff does: a line naming each object and what happens to
// it, then its unified diff. No changes print nothing.
func WriteText(w io.Writer, changes []Change) error {
	for _, c := range changes {
		if _, err := fmt.Fprintf(w, "%s %s:\n%s", c.Key(), verbs[c.Change], c.Diff); err != nil {
			return err
		}
		if !strings.HasSuffix(c.Diff, "\n") {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
	}
	return nil
}
