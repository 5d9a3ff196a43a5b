package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	helmcli "helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// ActionOptions are install's and upgrade's flags and what Complete derives from them.
type ActionOptions struct {
	named
	action      release.Action
	Chart       string
	Version     string
	Values      values.Options
	Timeout     time.Duration
	Atomic      bool
	Description string
	Wait        bool
	WaitForJobs bool
	Output      string
	// Retries and Remediation: see docs/design.md, "Retries and remediation".
	Retries     int
	Remediation string
	Supersede   bool
	// ValuesFrom are --values-from references, sent as such: the values stay in the cluster.
	ValuesFrom  []string
	ReuseValues bool
	// Install (upgrade --install): a release that does not exist is installed, as helm does.
	Install bool
	ApplyFlags

	refs []valuesfrom.Ref
	// vals are the merged --values, --set and the like.
	vals map[string]any
}

// supersedeUsage is the help of --supersede (docs/design.md, "Supersede").
const supersedeUsage = "if a revision of the release is pending, cancel it (failed: \"superseded by revision N\") and run this one once it has ended"

// NewActionOptions are install's or upgrade's defaults on the shared flags g.
func NewActionOptions(g *Globals, action release.Action) *ActionOptions {
	return &ActionOptions{named: newNamed(g), action: action, Timeout: 5 * time.Minute, Output: "table"}
}

// NewCmdInstall is `install NAME CHART`.
func NewCmdInstall(g *Globals) *cobra.Command {
	o := NewActionOptions(g, release.ActionInstall)
	cmd := &cobra.Command{
		Use:   "install NAME CHART",
		Short: "Install a chart; answers at once with the pending release",
		Long:  "CHART is a chart archive URL (https://...), an oci:// reference, or REPO/CHART from the cluster's chart repositories.",
		Args:  rangeArgs(2, 2),
		RunE:  runE(o),
	}
	o.addFlags(cmd)
	return cmd
}

// NewCmdUpgrade is `upgrade NAME [CHART]`.
func NewCmdUpgrade(g *Globals) *cobra.Command {
	o := NewActionOptions(g, release.ActionUpgrade)
	cmd := &cobra.Command{
		Use:   "upgrade NAME [CHART]",
		Short: "Upgrade a release; without CHART the release's chart is reused",
		Args:  rangeArgs(1, 2),
		RunE:  runE(o),
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&o.Supersede, "supersede", o.Supersede, supersedeUsage)
	cmd.Flags().BoolVar(&o.ReuseValues, "reuse-values", o.ReuseValues, "reuse the last release's values and values-from references, with this upgrade's over them")
	cmd.Flags().BoolVarP(&o.Install, "install", "i", o.Install, "if a release by this name doesn't already exist, run an install")
	return cmd
}

func (o *ActionOptions) addFlags(cmd *cobra.Command) {
	o.addChartFlags(cmd)
	f := cmd.Flags()
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "time to wait for any individual Kubernetes operation (like Jobs for hooks)")
	f.BoolVar(&o.Atomic, "atomic", o.Atomic, "roll back (uninstall on install) if the action fails; implies the release waits for its resources")
	f.StringVar(&o.Description, "description", o.Description, "add a custom description")
	f.BoolVar(&o.Wait, "wait", o.Wait, "follow the release until it is deployed or failed (exit 1 on failed)")
	f.BoolVar(&o.WaitForJobs, "wait-for-jobs", o.WaitForJobs, "have the install wait until all Jobs complete")
	addOutputFlag(f, &o.Output)
	f.IntVar(&o.Retries, "retries", o.Retries, "attempts after a failed action, each a new revision (0 to 10)")
	f.StringVar(&o.Remediation, "remediation", o.Remediation, "after the last failed attempt: rollback (upgrade) or uninstall")
	o.addApplyFlags(cmd)
}

// addChartFlags are the chart's version and the values (install, upgrade, diff).
func (o *ActionOptions) addChartFlags(cmd *cobra.Command) {
	o.addValuesFlags(cmd)
	cmd.Flags().StringArrayVar(&o.ValuesFrom, "values-from", nil, "values from a key of a Secret or ConfigMap of the release's namespace, read in the cluster: secret/NAME[:key] or configmap/NAME[:key] (key: values.yaml; can repeat, merged in order before the other values)")
}

// addValuesFlags are the chart's version and helm's values flags (template's too).
func (o *ActionOptions) addValuesFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Version, "version", o.Version, "chart version (default: latest)")
	f.StringSliceVarP(&o.Values.ValueFiles, "values", "f", nil, "values from a YAML file or URL (can repeat)")
	f.StringArrayVar(&o.Values.Values, "set", nil, "set values on the command line (key1=val1,key2=val2)")
	f.StringArrayVar(&o.Values.StringValues, "set-string", nil, "set STRING values on the command line")
	f.StringArrayVar(&o.Values.FileValues, "set-file", nil, "set values from files (key=path)")
	f.StringArrayVar(&o.Values.JSONValues, "set-json", nil, "set JSON values on the command line")
}

// Complete takes NAME and CHART, merges the values and finds the namespace and submit.
func (o *ActionOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) == 2 {
		o.Chart = args[1]
	}
	vals, err := o.Values.MergeValues(getter.All(helmcli.New()))
	if err != nil {
		return fmt.Errorf("values: %w", err)
	}
	o.vals = vals
	if o.refs, err = parseValuesFrom(o.ValuesFrom); err != nil {
		return err
	}
	return o.named.Complete(cmd, args)
}

// send asks for the install or upgrade (upgrade --install installs a missing release, as helm).
func (o *ActionOptions) send(ctx context.Context, req api.ReleaseRequest) (*corev1.Secret, error) {
	if o.action == release.ActionInstall {
		return o.submit.Install(ctx, req)
	}
	sec, err := o.submit.Upgrade(ctx, req)
	var apiErr *submitclient.APIError
	if !o.Install || !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || !strings.Contains(apiErr.Message, release.ErrNotFound.Error()) {
		return sec, err
	}
	fmt.Fprintf(o.Out, "Release %q does not exist. Installing it now.\n", o.Name)
	req.ReuseValues, req.Supersede = false, false
	return o.submit.Install(ctx, req)
}

// parseValuesFrom reads --values-from flags (syntax only; submit checks the objects).
func parseValuesFrom(flags []string) ([]valuesfrom.Ref, error) {
	var refs []valuesfrom.Ref
	for _, f := range flags {
		r, err := valuesfrom.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("--values-from: %w", err)
		}
		refs = append(refs, r)
	}
	return refs, nil
}

// Validate checks the options before anything is sent (submit checks how they go together).
func (o *ActionOptions) Validate() error {
	remediation := o.Remediation == api.RemediationNone || o.Remediation == api.RemediationRollback || o.Remediation == api.RemediationUninstall
	return o.check(refuseIf(o.action == release.ActionInstall && o.Chart == "", "CHART is required"),
		refuseIf(o.Install && o.Chart == "", "CHART is required with --install"),
		refuseIf(o.Retries < 0 || o.Retries > api.MaxRetries, "--retries %d: want 0 to %d", o.Retries, api.MaxRetries),
		refuseIf(!remediation, "--remediation %q: want %s, %s or none", o.Remediation, api.RemediationRollback, api.RemediationUninstall),
		o.validateApply())
}

// Run sends the request, prints the pending release, and with --wait follows it.
func (o *ActionOptions) Run(ctx context.Context) error {
	url, entry := chartRef(o.Chart)
	req := api.ReleaseRequest{Name: o.Name, Namespace: o.ns, ChartURL: url, IndexEntry: entry,
		ChartVersion: o.Version, Values: o.vals, Timeout: o.Timeout.String(),
		// The release itself waits for its resources when the user asks to wait for it.
		Wait: o.Wait || o.Atomic, WaitForJobs: o.WaitForJobs, Atomic: o.Atomic, Description: o.Description,
		Retries: o.Retries, Remediation: o.Remediation, Supersede: o.Supersede,
		ValuesFrom: o.refs, ReuseValues: o.ReuseValues,
		ServerSide: api.ServerSide(o.ServerSide), ForceConflicts: o.ForceConflicts}
	sec, err := o.send(ctx, req)
	if err != nil {
		return err
	}
	if err := printAccepted(o.Out, o.Output, sec); err != nil {
		return err
	}
	t := o.track(o.target, o.Name)
	switch {
	case !o.Wait:
		return nil
	case o.Retries > 0 || o.Remediation != "": // follow every attempt (attempts.go)
		accepted, _ := strconv.Atoi(sec.Labels["version"]) // the revision the 201 reserved
		return t.attempts(ctx, accepted, o.Remediation)
	}
	return t.toEnd(ctx)
}

// ApplyFlags are Helm v4's --server-side and --force-conflicts (the v4 engine, docs/api.md).
type ApplyFlags struct {
	// ServerSide is "true", "false", "auto" or "" (the API's default: client-side).
	ServerSide     string
	ForceConflicts bool
}

func (a *ApplyFlags) addApplyFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.ServerSide, "server-side", a.ServerSide, `apply server-side under the executor's Helm v4 engine: true, false or auto (as the release being replaced); --server-side alone is true; default client-side, as the console`)
	f.Lookup("server-side").NoOptDefVal = string(api.ServerSideTrue)
	f.BoolVar(&a.ForceConflicts, "force-conflicts", a.ForceConflicts, "with server-side apply, take over fields another field manager owns")
}

// validateApply refuses a --server-side value submit would refuse.
func (a ApplyFlags) validateApply() error {
	switch api.ServerSide(a.ServerSide) {
	case api.ServerSideDefault, api.ServerSideTrue, api.ServerSideFalse, api.ServerSideAuto:
		return nil
	}
	return fmt.Errorf("--server-side %q: want true, false or auto", a.ServerSide)
}
