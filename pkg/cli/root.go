// Package cli is oc-helm, the oc/kubectl plugin for async install, upgrade, list and status.
// Each command is Options + Complete/Validate/Run, with every output through IOStreams.
package cli

import (
	"context"
	"fmt"
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

	"github.com/async-helm/async-helm/pkg/submitclient"
)

// EnvServer names submit's URL when --server is not given.
const EnvServer = "ASYNC_HELM_SERVER"

// Globals are the flags every command shares.
type Globals struct {
	Config          *genericclioptions.ConfigFlags
	Server          string
	Token           string
	SubmitNamespace string
	IO              genericiooptions.IOStreams
	Now             func() time.Time
	// PollInterval is how often --wait and --watch look at the release.
	PollInterval time.Duration
}

// NewRootCmd builds `oc-helm` (run as `oc helm` or `kubectl helm`).
func NewRootCmd(io genericiooptions.IOStreams) *cobra.Command {
	g := &Globals{Config: genericclioptions.NewConfigFlags(true), IO: io, Now: time.Now, PollInterval: time.Second}
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
	cmd.PersistentFlags().StringVar(&g.Token, "token", "", "bearer token for submit (default: the kubeconfig context's token)")
	cmd.PersistentFlags().StringVar(&g.SubmitNamespace, "submit-namespace", "async-helm", "namespace of the Knative Service submit")
	cmd.AddCommand(newInstallCmd(g), newUpgradeCmd(g), newListCmd(g), newStatusCmd(g), newHistoryCmd(g))
	return cmd
}

// namespace is -n, else the kubeconfig context's namespace, else default.
func (g *Globals) namespace() string {
	if ns, _, err := g.Config.ToRawKubeConfigLoader().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// client finds submit: --server, $ASYNC_HELM_SERVER, then the URL of the Knative Service.
func (g *Globals) client(ctx context.Context) (*submitclient.Client, error) {
	c := &submitclient.Client{Server: g.Server, Token: g.Token}
	if c.Server == "" {
		c.Server = os.Getenv(EnvServer)
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
		return "", name + "--" + repo // the console's index entry form
	}
	return "", chart
}
