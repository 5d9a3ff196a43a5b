package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// cluster is one local control plane: its files live under dir, its binaries under bin.
type cluster struct {
	dir, bin   string
	readyDelay time.Duration
	slowDelay  time.Duration
}

// state is what a running cluster remembers between `up` calls.
type state struct {
	Ports      map[string]int `json:"ports"`
	Pids       map[string]int `json:"pids"`
	AdminToken string         `json:"adminToken"`
	DevToken   string         `json:"devToken"`
	ReadyDelay string         `json:"readyDelay"`
	SlowDelay  string         `json:"slowDelay"`
}

func (c *cluster) path(p ...string) string { return filepath.Join(append([]string{c.dir}, p...)...) }
func (c *cluster) Kubeconfig() string      { return c.path("kubeconfig") }

func (c *cluster) load() (*state, error) {
	b, err := os.ReadFile(c.path("state.json"))
	if err != nil {
		return nil, err
	}
	var s state
	return &s, json.Unmarshal(b, &s)
}

func (c *cluster) save(s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.path("state.json"), b, 0o600)
}

// running reports whether every recorded process is alive and the apiserver is ready.
func (c *cluster) running(ctx context.Context) bool {
	s, err := c.load()
	if err != nil || len(s.Pids) == 0 {
		return false
	}
	for _, pid := range s.Pids {
		if syscall.Kill(pid, 0) != nil {
			return false
		}
	}
	cs, err := c.client()
	if err != nil {
		return false
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

func (c *cluster) client() (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Up starts the control plane and kwok, or reuses the one already running.
func (c *cluster) Up(ctx context.Context) error {
	start := time.Now()
	if c.running(ctx) {
		fmt.Printf("local cluster already up (KUBECONFIG=%s)\n", c.Kubeconfig())
		return nil
	}
	_ = c.Down() // leftovers of a half-dead cluster
	for _, d := range []string{"pki", "logs", "etcd"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return err
		}
	}
	p, err := writePKI(c.path("pki"))
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	s := &state{Ports: map[string]int{}, Pids: map[string]int{}, AdminToken: randomToken(), DevToken: randomToken(),
		ReadyDelay: c.readyDelay.String(), SlowDelay: c.slowDelay.String()}
	if old, err := c.load(); err == nil && old.AdminToken != "" {
		s.AdminToken, s.DevToken = old.AdminToken, old.DevToken
	}
	for _, name := range []string{"etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler", "kwok"} {
		if s.Ports[name], err = freePort(); err != nil {
			return err
		}
	}
	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n%s,dev,dev-uid,\"developers\"\n", s.AdminToken, s.DevToken)
	if err := os.WriteFile(c.path("pki", "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return err
	}
	if err := c.writeKubeconfig(s, p); err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", s.Ports["etcd"])
	if err := c.spawn(s, "etcd", "server",
		"--data-dir="+c.path("etcd"), "--name=local",
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", s.Ports["etcd-peer"]),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", s.Ports["etcd-peer"]),
		fmt.Sprintf("--initial-cluster=local=http://127.0.0.1:%d", s.Ports["etcd-peer"]),
		"--unsafe-no-fsync", "--quota-backend-bytes=8589934592", "--log-level=warn"); err != nil {
		return err
	}
	if err := c.spawn(s, "apiserver", "kube-apiserver",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(s.Ports["apiserver"]),
		"--cert-dir="+c.path("pki"),
		"--tls-cert-file="+p.ServingCert, "--tls-private-key-file="+p.ServingKey,
		"--client-ca-file="+p.CACert,
		"--token-auth-file="+c.path("pki", "tokens.csv"),
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file="+p.SAPub,
		"--service-account-signing-key-file="+p.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
		"--allow-privileged=true",
		"--max-mutating-requests-inflight=2000", "--max-requests-inflight=4000",
	); err != nil {
		return err
	}
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		return err
	}
	kc := c.Kubeconfig()
	if err := c.spawn(s, "controller-manager", "kube-controller-manager",
		"--kubeconfig="+kc, "--leader-elect=false", "--controllers=*",
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+p.SAKey, "--root-ca-file="+p.CACert,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.Ports["controller-manager"]),
		"--kube-api-qps=500", "--kube-api-burst=1000", "--concurrent-deployment-syncs=20", "--concurrent-replicaset-syncs=20",
	); err != nil {
		return err
	}
	if err := c.spawn(s, "scheduler", "kube-scheduler",
		"--kubeconfig="+kc, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(s.Ports["scheduler"]),
		"--kube-api-qps=500", "--kube-api-burst=1000",
	); err != nil {
		return err
	}
	stages, err := stagesYAML(c.readyDelay, c.slowDelay)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.path("kwok-stages.yaml"), stages, 0o600); err != nil {
		return err
	}
	if err := c.spawn(s, "kwok", "kwok",
		"--kubeconfig="+kc, "--config="+c.path("kwok-stages.yaml"),
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		fmt.Sprintf("--server-address=127.0.0.1:%d", s.Ports["kwok"]),
	); err != nil {
		return err
	}
	if err := c.save(s); err != nil {
		return err
	}
	if err := c.prepare(ctx); err != nil {
		return err
	}
	fmt.Printf("local cluster up in %.1fs (KUBECONFIG=%s; contexts admin, dev; pods ready after %s, %s in slow namespaces)\n",
		time.Since(start).Seconds(), kc, c.readyDelay, c.slowDelay)
	return nil
}

func (c *cluster) spawn(s *state, name, binary string, args ...string) error {
	logf, err := os.Create(c.path("logs", name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(c.bin, binary), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own session: the cluster outlives the `up` command and a Ctrl-C in its terminal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.Pids[name] = cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	return c.save(s)
}

func (c *cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	cs, err := c.client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("apiserver not ready after %s (see %s): %w", timeout, c.path("logs", "apiserver.log"), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// prepare registers the fake nodes and waits until pods can be created and scheduled.
func (c *cluster) prepare(ctx context.Context) error {
	cs, err := c.client()
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("256"),
		corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourcePods:   resource.MustParse("2000"),
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: fastNode, Labels: map[string]string{speedKey: "fast", "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity}},
		{ObjectMeta: metav1.ObjectMeta{Name: slowNode, Labels: map[string]string{speedKey: "slow", "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: slowTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity}},
		{ObjectMeta: metav1.ObjectMeta{Name: gitlabNode, Labels: map[string]string{speedKey: "gitlab", "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: slowTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity}},
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, n := range nodes {
		for {
			_, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("create node %s: %w", n.Name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for {
		ready := 0
		for _, n := range nodes {
			got, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err == nil {
				for _, cond := range got.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ready++
					}
				}
			}
		}
		_, saErr := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if ready == len(nodes) && saErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("nodes not Ready or default ServiceAccount missing after 60s (see logs under " + c.path("logs") + ")")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *cluster) writeKubeconfig(s *state, p pki) error {
	server := fmt.Sprintf("https://127.0.0.1:%d", s.Ports["apiserver"])
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthority: p.CACert}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: s.AdminToken}
	cfg.AuthInfos["dev"] = &clientcmdapi.AuthInfo{Token: s.DevToken}
	cfg.Contexts["admin"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin", Namespace: "default"}
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "dev", Namespace: "default"}
	cfg.CurrentContext = "admin"
	return clientcmd.WriteToFile(*cfg, c.Kubeconfig())
}

// Down stops every process of the cluster and removes its data.
func (c *cluster) Down() error {
	s, err := c.load()
	if err == nil {
		for _, name := range []string{"kwok", "scheduler", "controller-manager", "apiserver", "etcd"} {
			if pid, ok := s.Pids[name]; ok {
				stopProcess(pid)
			}
		}
	}
	for _, p := range []string{"etcd", "state.json", "kubeconfig"} {
		if err := os.RemoveAll(c.path(p)); err != nil {
			return err
		}
	}
	return nil
}

func stopProcess(pid int) {
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for i := 0; i < 50; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
