// Package cli is oc-helm, the oc/kubectl plugin for async install, upgrade, list and status.
// Each command is Options + Complete/Validate/Run, with every output through IOStreams.
package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"

	"github.com/async-helm/async-helm/pkg/chartref"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// EnvServer names submit's URL when --server is not given.
const EnvServer = "ASYNC_HELM_SERVER"

// EnvToken is the bearer token for submit when --token is not given (before the
// kubeconfig context's).
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
	Now          func() time.Time
	// PollInterval is how often --wait and --watch look at the release.
	PollInterval time.Duration
}

// NewRootCmd builds `oc-helm` (run as `oc helm` or `kubectl helm`).
func NewRootCmd(io genericiooptions.IOStreams) *cobra.Command {
	return newRootCmd(&Globals{IO: io, Now: time.Now, PollInterval: time.Second})
}

// newRootCmd builds the commands on g (tests set its clock and poll interval).
func newRootCmd(g *Globals) *cobra.Command {
	g.Config = genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:           "oc-helm",
		Short:         "Install and upgrade Helm charts asynchronously through async-helm",
		Long:          "oc helm answers at once with the release and its secret while the install goes on in the cluster.\nUse --wait to follow it to the end.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --server and --token name submit and its credentials here, not the API server: the
	// kubeconfig context still says which cluster (and token) to use otherwise.
	g.Config.APIServer, g.Config.BearerToken = nil, nil
	g.Config.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVar(&g.Server, "server", "", "URL of async-helm's submit (default: $"+EnvServer+", then the Knative Service submit)")
	cmd.PersistentFlags().StringVar(&g.Token, "token", "", "bearer token for submit (default: $"+EnvToken+", then the kubeconfig context's token)")
	cmd.PersistentFlags().BoolVar(&g.InsecureHTTP, FlagInsecureHTTP, false, "send the bearer token to submit over plain http even to a host that is not loopback (anyone on the way can read it)")
	cmd.PersistentFlags().StringVar(&g.SubmitNamespace, "submit-namespace", "async-helm", "namespace of the Knative Service submit")
	cmd.AddCommand(NewCmdInstall(g), NewCmdUpgrade(g), NewCmdList(g), NewCmdStatus(g), NewCmdHistory(g))
	cmd.AddCommand(NewCmdCancel(g))
	cmd.AddCommand(NewCmdLogs(g))
	cmd.AddCommand(NewCmdUninstall(g), NewCmdRollback(g))
	return cmd
}

// options is every command's XOptions: Complete derives what the flags and arguments imply
// (names, the namespace, submit's client), Validate checks the input without side effects,
// Run does the work (and never validates again).
type options interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// runE is a command's RunE: o's Complete, Validate and Run, in that order.
func runE(o options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}

// target is what each command's Complete derives from the shared flags: the namespace and
// submit's client.
type target struct {
	ns     string
	submit *submitclient.Client
}

// findTarget finds the namespace and submit (asking the cluster for submit's URL when
// neither --server nor $ASYNC_HELM_SERVER names it).
func (g *Globals) findTarget(ctx context.Context) (target, error) {
	c, err := g.client(ctx)
	if err != nil {
		return target{}, err
	}
	return target{ns: g.namespace(), submit: c}, nil
}

// requireName refuses an empty NAME before submit answers it less clearly.
func requireName(name string) error {
	if name == "" {
		return errors.New("NAME is required")
	}
	return nil
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

// client finds submit and the token to call it with, and refuses to send the token where
// the network could read it.
func (g *Globals) client(ctx context.Context) (*submitclient.Client, error) {
	c, err := g.findClient(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkTokenTransport(c.Server, c.Token, g.InsecureHTTP); err != nil {
		return nil, err
	}
	return c, nil
}

// checkTokenTransport refuses a bearer token (the user's cluster credential) over plain
// http to anything but loopback, unless allowed: the Knative Service's URL is often http.
func checkTokenTransport(server, token string, allowInsecure bool) error {
	if token == "" || allowInsecure {
		return nil
	}
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("submit URL %q: %w", server, err)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("refusing to send your token over plain http to %s: use an https URL (--server), or --%s if the network to it is trusted", u.Host, FlagInsecureHTTP)
	}
	return fmt.Errorf("submit URL %q: scheme must be https or http", server)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// findClient finds submit: --server, $ASYNC_HELM_SERVER, then the URL of the Knative Service;
// the token: --token, $ASYNC_HELM_TOKEN, then the kubeconfig context's.
func (g *Globals) findClient(ctx context.Context) (*submitclient.Client, error) {
	c := &submitclient.Client{Server: g.Server, Token: g.Token}
	if c.Server == "" {
		c.Server = os.Getenv(EnvServer)
	}
	if c.Token == "" {
		c.Token = os.Getenv(EnvToken)
	}
	needCluster := c.Server == "" || c.Token == ""
	if !needCluster {
		return c, nil
	}
	rc, err := g.Config.ToRESTConfig()
	if err != nil {
		if c.Server != "" {
			return c, nil // no kubeconfig: talk to submit without a token
		}
		return nil, fmt.Errorf("no submit URL (--server or $%s) and no kubeconfig to find it: %w", EnvServer, err)
	}
	if c.Token == "" {
		c.Token = rc.BearerToken
	}
	if c.Server == "" {
		dc, err := dynamic.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		ksvc := schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
		u, err := dc.Resource(ksvc).Namespace(g.SubmitNamespace).Get(ctx, "submit", metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("find submit: no --server, no $%s, and the Knative Service %s/submit: %w", EnvServer, g.SubmitNamespace, err)
		}
		url, _, _ := unstructured.NestedString(u.Object, "status", "url")
		if url == "" {
			return nil, fmt.Errorf("find submit: Knative Service %s/submit has no URL yet", g.SubmitNamespace)
		}
		c.Server = url
	}
	return c, nil
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
