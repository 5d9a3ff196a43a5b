package helmexec

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	action4 "helm.sh/helm/v4/pkg/action"
	chart4 "helm.sh/helm/v4/pkg/chart/v2"
	kube4 "helm.sh/helm/v4/pkg/kube"
	releasei4 "helm.sh/helm/v4/pkg/release"
	release4 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// v4Helm is the v4 engine's Helm (action.go): Helm v4's actions on the same storage; read
// is Helm v3's configuration over it, whose capabilities (fixed by the render) Helm v4's
// install and upgrade run with.
type v4Helm struct {
	cfg  *action4.Configuration
	read *action.Configuration
}

// waitStrategy: `wait` is kstatus's watcher; without it Helm v4 waits for hooks only, as
// Helm v3 (and the console) do.
func waitStrategy(req Request) kube4.WaitStrategy {
	if req.Wait || req.WaitForJobs || req.Atomic {
		return kube4.StatusWatcherStrategy
	}
	return kube4.HookOnlyStrategy
}

// v4Out is Helm v4's answer as the executor's type.
func v4Out(rel releasei4.Releaser, err error) (*helmrelease.Release, error) {
	err = applyConflict(err)
	if rel == nil {
		return nil, err
	}
	r4, cerr := asV4(rel)
	if cerr != nil {
		return nil, cerr
	}
	r3, cerr := releaseV3(r4)
	if cerr != nil {
		return nil, cerr
	}
	return r3, err
}

// chartToRun is ch as Helm v4's, with Helm v4's capabilities those the render fixed.
func (h v4Helm) chartToRun(ch *chart.Chart) (*chart4.Chart, error) {
	if c := h.read.Capabilities; c != nil {
		h.cfg.Capabilities = capsV4(c)
	}
	return chartV4(ch)
}

func (h v4Helm) install(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error) {
	ch4, err := h.chartToRun(ch)
	if err != nil {
		return nil, err
	}
	h.cfg.Releases.MaxHistory = req.MaxHistory
	return v4Out(newInstallV4(h.cfg, req).RunWithContext(ctx, ch4, values))
}

func (h v4Helm) upgrade(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error) {
	ch4, err := h.chartToRun(ch)
	if err != nil {
		return nil, err
	}
	return v4Out(newUpgradeV4(h.cfg, req).RunWithContext(ctx, req.Name, ch4, values))
}

// newInstallV4 maps a request onto Helm v4's Install.
func newInstallV4(cfg *action4.Configuration, req Request) *action4.Install {
	i := action4.NewInstall(cfg)
	i.ReleaseName, i.Namespace = req.Name, req.Namespace
	i.Timeout, i.WaitStrategy, i.WaitForJobs = req.Timeout, waitStrategy(req), req.WaitForJobs
	i.RollbackOnFailure = req.Atomic
	i.Description, i.Labels, i.Replace = req.Description, req.Labels, req.Replace
	i.ServerSideApply = req.ServerSide == "true" || (req.ServerSide == "auto" && req.Replace && applyMethod(cfg.Releases.Last(req.Name)) == "ssa")
	i.ForceConflicts = req.ForceConflicts && i.ServerSideApply
	i.SkipSchemaValidation = true // checked in the worker, within its bounds
	return i
}

// newUpgradeV4 maps a request onto Helm v4's Upgrade.
func newUpgradeV4(cfg *action4.Configuration, req Request) *action4.Upgrade {
	u := action4.NewUpgrade(cfg)
	u.Namespace, u.Timeout, u.WaitStrategy, u.WaitForJobs = req.Namespace, req.Timeout, waitStrategy(req), req.WaitForJobs
	u.RollbackOnFailure = req.Atomic
	u.Description, u.Labels, u.MaxHistory = req.Description, req.Labels, req.MaxHistory
	u.ResetValues = true // values holds the reused ones (upgradeValues)
	u.ServerSideApply = serverSideOf(req)
	u.ForceConflicts = forceOf(req, func() string { return applyMethod(cfg.Releases.Last(req.Name)) })
	u.SkipSchemaValidation = true // checked in the worker, within its bounds
	return u
}

// serverSideOf is Helm v4's ServerSideApply of an upgrade or rollback: client-side unless
// the request says otherwise.
func serverSideOf(req Request) string {
	switch req.ServerSide {
	case "true", "auto":
		return req.ServerSide
	}
	return "false"
}

// forceOf is Helm v4's ForceConflicts of an upgrade or rollback: a force only where the
// apply is server-side, "auto" resolved as Helm v4 resolves it, from replaced (the apply
// method of the record Helm takes it from: an upgrade's latest, a rollback's target). Helm
// v4 refuses a force with a client-side apply, also when "auto" came out client-side.
func forceOf(req Request, replaced func() string) bool {
	switch req.ServerSide {
	case "true":
		return req.ForceConflicts
	case "auto":
		return req.ForceConflicts && replaced() == string(release4.ApplyMethodServerSideApply)
	}
	return false
}

// applyMethod is the apply method of the record a read of Helm v4's storage answered (""
// without one).
func applyMethod(rel releasei4.Releaser, err error) string {
	if r, cerr := asV4(rel); err == nil && cerr == nil && r != nil {
		return r.ApplyMethod
	}
	return ""
}

func (h v4Helm) rollback(req Request) error {
	r := action4.NewRollback(h.cfg)
	r.Version, r.Timeout, r.WaitStrategy, r.WaitForJobs = req.RollbackTo, req.Timeout, waitStrategy(req), req.WaitForJobs
	r.MaxHistory = req.MaxHistory
	r.ServerSideApply = serverSideOf(req)
	r.ForceConflicts = forceOf(req, func() string { return applyMethod(h.cfg.Releases.Get(req.Name, req.RollbackTo)) })
	return applyConflict(r.Run(req.Name))
}

func (h v4Helm) uninstall(req Request) (*helmrelease.Release, error) {
	u := action4.NewUninstall(h.cfg)
	u.Timeout, u.Description = req.Timeout, req.Description
	// Wait until every deleted resource is gone: "uninstalled" then means nothing is left.
	u.WaitStrategy = kube4.StatusWatcherStrategy
	u.DeletionPropagation = "background"
	res, err := u.Run(req.Name)
	if res != nil && res.Release != nil {
		return v4Out(res.Release, err)
	}
	return nil, err
}

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
