package helmexec

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrApplyConflict is a server-side apply refused because another field manager owns a
// field the chart sets; force_conflicts takes the fields over.
var ErrApplyConflict = errors.New("server-side apply conflict")

// conflictManager finds the manager in the API server's text when Helm kept only the text.
var conflictManager = regexp.MustCompile(`conflicts? with "([^"]+)"`)

// applyConflict names the managers of a conflict of server-side apply; other errors pass.
func applyConflict(err error) error {
	if err == nil {
		return nil
	}
	var managers []string
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Details != nil {
		for _, c := range st.Status().Details.Causes {
			if c.Type == metav1.CauseTypeFieldManagerConflict {
				managers = appendManager(managers, c.Message)
			}
		}
	}
	if len(managers) == 0 {
		for _, m := range conflictManager.FindAllStringSubmatch(err.Error(), -1) {
			managers = appendManager(managers, `conflict with "`+m[1]+`"`)
		}
	}
	if len(managers) == 0 {
		return err
	}
	return fmt.Errorf("%w: the fields are managed by %s (force_conflicts: true takes them over): %w",
		ErrApplyConflict, strings.Join(managers, ", "), err)
}

func appendManager(list []string, msg string) []string {
	m := conflictManager.FindStringSubmatch(msg)
	if m == nil {
		return list
	}
	name := fmt.Sprintf("%q", m[1])
	for _, l := range list {
		if l == name {
			return list
		}
	}
	return append(list, name)
}
