// Package cli is oc-helm, the oc/kubectl plugin for async install and upgrade and helm's reads;
// each command is XOptions and NewCmdX, its RunE Complete, Validate, Run (sample-cli-plugin).
package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/clock"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
)

// EnvServer names submit's URL when --server is not given.
const EnvServer = "ASYNC_HELM_SERVER"

// EnvToken is the bearer token for submit when --token is not given.
const EnvToken = "ASYNC_HELM_TOKEN"

// FlagInsecureHTTP lets the token go over plain http to a host that is not loopback.
const FlagInsecureHTTP = "insecure-send-token-over-http"

// Globals are the flags every command shares.
type Globals struct {
	Config          *genericclioptions.ConfigFlags
	Server          string
	Token           string
	SubmitNamespace string
	// InsecureHTTP allows sending the token over plain http to a host other than loopback.
	InsecureHTTP bool
	IO           genericiooptions.IOStreams
	// Clock dates the elapsed times and the note's wait (nil: the wall clock).
	Clock clock.PassiveClock
	// PollInterval is how often --wait and --watch look at the release.
	PollInterval time.Duration
}

// NewRootCmd builds `oc-helm` (run as `oc helm` or `kubectl helm`).
func NewRootCmd(io genericiooptions.IOStreams) *cobra.Command {
	return newRootCmd(&Globals{IO: io, PollInterval: time.Second})
}

// newRootCmd builds the commands on g (tests set its clock and poll interval).
func newRootCmd(g *Globals) *cobra.Command {
	g.Config = genericclioptions.NewConfigFlags(true)
	g.IO.Out, g.IO.ErrOut = termOut(g.IO.Out), termOut(g.IO.ErrOut)
	cmd := &cobra.Command{
		Use:           "oc-helm",
		Short:         "Install and upgrade Helm charts asynchronously through async-helm",
		Long:          "oc helm answers at once with the release and its secret while the install goes on in the cluster.\nUse --wait to follow it to the end.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --server and --token name submit and its credentials here, not the API server.
	g.Config.APIServer, g.Config.BearerToken = nil, nil
	g.Config.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&g.Server, "server", "", "URL of async-helm's submit (default: $"+EnvServer+", then the Knative Service submit)")
	cmd.PersistentFlags().StringVar(&g.Token, "token", "", "bearer token for submit (default: $"+EnvToken+", then the kubeconfig context's token)")
	cmd.PersistentFlags().BoolVar(&g.InsecureHTTP, FlagInsecureHTTP, false, "send the bearer token to submit over plain http even to a host that is not loopback (anyone on the way can read it)")
	cmd.PersistentFlags().StringVar(&g.SubmitNamespace, "submit-namespace", "async-helm", "namespace of the Knative Service submit")
	cmd.AddCommand(NewCmdInstall(g), NewCmdUpgrade(g), NewCmdList(g), NewCmdStatus(g), NewCmdHistory(g), NewCmdCancel(g),
		NewCmdLogs(g), NewCmdUninstall(g), NewCmdRollback(g), NewCmdDiff(g), NewCmdGet(g), NewCmdTemplate(g))
	return cmd
}

// options is every command's XOptions: Complete, Validate (no side effects), connect, Run.
type options interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	connect(ctx context.Context) error
	Run(ctx context.Context) error
}

// runE is a command's RunE: o's Complete, Validate, connect and Run, in that order.
func runE(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		if err := o.connect(cmd.Context()); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}

// refuseIf is one check of a Validate: the error format names, when bad.
func refuseIf(bad bool, format string, args ...any) error {
	if !bad {
		return nil
	}
	return fmt.Errorf(format, args...)
}

// firstError is a Validate's answer: the first of its checks, in order, that refused.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// named is what a command on one release holds: the streams, the flags, NAME and submit.
type named struct {
	genericiooptions.IOStreams
	*Globals
	Name string
	target
}

func newNamed(g *Globals) named { return named{IOStreams: g.IO, Globals: g} }

// check is a Validate's answer: NAME (said more clearly than submit would), checks, the token's way.
func (n *named) check(checks ...error) error {
	return firstError(append(append([]error{refuseIf(n.Name == "", "NAME is required")}, checks...), n.validateSubmit())...)
}

// Validate checks the name and where the token would go.
func (n *named) Validate() error { return n.check() }

// Complete takes NAME and finds the namespace and submit.
func (n *named) Complete(_ *cobra.Command, args []string) (err error) {
	n.Name = args[0]
	n.target, err = n.findTarget()
	return err
}

// pause waits one poll interval, or answers ctx's error when it ends first.
func (g *Globals) pause(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(g.PollInterval):
		return nil
	}
}

// namespace is -n, else the kubeconfig context's namespace, else default.
func (g *Globals) namespace() string {
	if ns, _, err := g.Config.ToRawKubeConfigLoader().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// chartRef reads CHART: a URL (http, https, oci) or a repo/chart index entry.
func chartRef(chart string) (url, indexEntry string) {
	if strings.Contains(chart, "://") {
		return chart, ""
	}
	if repo, name, ok := strings.Cut(chart, "/"); ok {
		return "", chartref.IndexEntry(name, repo)
	}
	return "", chart
}
