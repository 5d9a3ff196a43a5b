package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
)

// The one-hop floor is the least any service in front of the API server does on the way to
// a 201: it reads the same JSON request over HTTP/1.1, creates one Secret the size of a
// reservation with the same client, and answers with it as submit does. No authentication, no event, no informer.
// It runs as its own process (the bench executes itself again), as submit does, so that
// submit's figures can be read beside what one extra hop costs on the same machine.
const hopEnv = "BENCH_HOP_FLOOR" // namespace/name of the template Secret; ns of the copies

// serveHopFloorIfAsked serves the floor and exits when the bench was started as one.
func serveHopFloorIfAsked() {
	spec := os.Getenv(hopEnv)
	if spec == "" {
		return
	}
	if err := serveHopFloor(spec); err != nil {
		fmt.Fprintln(os.Stderr, "hop floor:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func serveHopFloor(spec string) error {
	parts := strings.Split(spec, "/")
	if len(parts) != 3 {
		return fmt.Errorf("%s=%q: want templateNamespace/templateName/targetNamespace", hopEnv, spec)
	}
	cl, err := kube.Open(os.Getenv("KUBECONFIG"), kube.Unlimited)
	if err != nil {
		return err
	}
	ctx := context.Background()
	tmpl, err := cl.Typed.CoreV1().Secrets(parts[0]).Get(ctx, parts[1], metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("template: %w", err)
	}
	target := parts[2]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println("http://" + ln.Addr().String())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req api.ReleaseRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		labels := map[string]string{}
		for k, v := range tmpl.Labels {
			labels[k] = v
		}
		labels[release.LabelName], labels[release.LabelOwner] = req.Name, "bench"
		created, err := cl.Typed.CoreV1().Secrets(target).Create(r.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(req.Name, 1), Labels: labels, Annotations: tmpl.Annotations},
			Type:       tmpl.Type, Data: tmpl.Data,
		}, metav1.CreateOptions{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(created) // as submit answers: the created Secret
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(ln)
}

// startHopFloor starts the floor process; stop ends it.
func (b *bench) startHopFloor(tmpl *corev1.Secret, targetNS string) (url string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+b.kubeconfig,
		fmt.Sprintf("%s=%s/%s/%s", hopEnv, tmpl.Namespace, tmpl.Name, targetNS))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		stop()
		return "", nil, errors.Join(errors.New("hop floor did not start"), err)
	}
	return strings.TrimSpace(line), stop, nil
}
