package cli

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/submitclient"
)

// target is the namespace and submit's client; connect (before Run) finds an unnamed URL.
type target struct {
	ns     string
	submit *submitclient.Client
	// cluster, when set, is the kubeconfig's REST config to find submit's URL with.
	cluster         *rest.Config
	submitNamespace string
	insecureHTTP    bool
}

// findTarget reads the namespace and submit's client: URL and token from flag, environment, kubeconfig.
func (g *Globals) findTarget() (target, error) {
	t := target{ns: g.namespace(), submit: &submitclient.Client{Server: g.Server, Token: g.Token},
		submitNamespace: g.SubmitNamespace, insecureHTTP: g.InsecureHTTP}
	c := t.submit
	c.Server, c.Token = cmp.Or(c.Server, os.Getenv(EnvServer)), cmp.Or(c.Token, os.Getenv(EnvToken))
	if c.Server != "" && c.Token != "" {
		return t, nil
	}
	rc, err := g.Config.ToRESTConfig()
	if err != nil {
		if c.Server != "" {
			return t, nil // no kubeconfig: talk to submit without a token
		}
		return target{}, fmt.Errorf("no submit URL (--server or $%s) and no kubeconfig to find it: %w", EnvServer, err)
	}
	c.Token = cmp.Or(c.Token, rc.BearerToken)
	if c.Server == "" {
		t.cluster = rc
	}
	return t, nil
}

// validateSubmit refuses to send the token where the network could read it.
func (t *target) validateSubmit() error {
	if t.submit == nil || t.submit.Server == "" {
		return nil
	}
	return checkTokenTransport(t.submit.Server, t.submit.Token, t.insecureHTTP)
}

// connect finds submit's URL, the Knative Service's, when nothing named it.
func (t *target) connect(ctx context.Context) error {
	if t.cluster == nil {
		return nil
	}
	dc, err := dynamic.NewForConfig(t.cluster)
	if err != nil {
		return fmt.Errorf("find submit: %w", err)
	}
	ksvc := schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
	u, err := dc.Resource(ksvc).Namespace(t.submitNamespace).Get(ctx, "submit", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("find submit: no --server, no $%s, and the Knative Service %s/submit: %w", EnvServer, t.submitNamespace, err)
	}
	url, _, _ := unstructured.NestedString(u.Object, "status", "url")
	if url == "" {
		return fmt.Errorf("find submit: Knative Service %s/submit has no URL yet", t.submitNamespace)
	}
	if err := checkTokenTransport(url, t.submit.Token, t.insecureHTTP); err != nil {
		return err
	}
	t.submit.Server, t.cluster = url, nil
	return nil
}

// checkTokenTransport refuses the token over plain http (a Knative URL's) but to loopback.
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
