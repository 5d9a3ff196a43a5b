package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func execute(args ...string) (string, error) {
	var out bytes.Buffer
	root := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	root.SetArgs(append(args, "-n", "team", "--kubeconfig", os.DevNull))
	err := root.Execute()
	if err != nil {
		out.WriteString("Error: " + err.Error() + "\n")
	}
	return out.String(), err
}

// The token is the user's cluster credential: oc-helm does not send it in clear text
// across a network unless told to.
func TestTokenIsNotSentOverPlainHTTPToAnotherHost(t *testing.T) {
	// A host that is not loopback: refused before any connection.
	out, err := execute("list", "--server", "http://submit.async-helm.example.com", "--token", "secret-token")
	if err == nil {
		t.Fatal("list over plain http to another host with a token: no error")
	}
	assertGolden(t, []byte(out), filepath.Join("testdata", "token-over-http.txt"))
	if strings.Contains(out, "secret-token") {
		t.Error("the message shows the token")
	}

	// Loopback (make run) and https are fine; so is no token at all; the flag allows it.
	for _, c := range []struct {
		server, token string
		insecure      bool
		ok            bool
	}{
		{"http://127.0.0.1:8080", "t", false, true},
		{"http://[::1]:8080", "t", false, true},
		{"http://localhost:8080", "t", false, true},
		{"https://submit.example.com", "t", false, true},
		{"http://submit.example.com", "", false, true},
		{"http://submit.example.com", "t", true, true},
		{"http://10.0.0.7:8080", "t", false, false},
		{"http://127.0.0.1.nip.io", "t", false, false},
		{"ftp://submit.example.com", "t", false, false},
	} {
		err := checkTokenTransport(c.server, c.token, c.insecure)
		if (err == nil) != c.ok {
			t.Errorf("%s (token %q, insecure %v): %v, want ok=%v", c.server, c.token, c.insecure, err, c.ok)
		}
	}

	// Over loopback the same command talks to submit with the token.
	srv := fakeSubmit(t)
	if out, err := execute("list", "--server", srv.URL, "--token", "secret-token"); err != nil {
		t.Fatalf("list over loopback: %v\n%s", err, out)
	}
}
