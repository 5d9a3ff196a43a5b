package sweeper

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election decides which notifier pod sweeps: client-go's leader election on an own-namespace Lease.
type Election struct {
	Client kubernetes.Interface
	// Namespace and Name of the Lease; Identity is this pod's (its name and a random suffix).
	Namespace, Name, Identity string
	// LeaseDuration, RenewDeadline, RetryPeriod as client-go takes them: a dead leader is
	// replaced within LeaseDuration + 2 * 2.2 * RetryPeriod (RetryPeriod has a jitter of 1.2).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       *zap.SugaredLogger
	// OnLeading, when set, is told when this pod starts (true) and stops (false) leading.
	OnLeading func(bool)
}

// Default election timings: a dead leader is replaced within about 15 + 2 * 2.2 * 2 = 23.8 s;
// one that shuts down releases the Lease and is replaced within one RetryPeriod.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Run campaigns until ctx ends; lead runs while this pod leads, and must return when it stops.
func (e *Election) Run(ctx context.Context, lead func(context.Context)) error {
	cfg, err := e.config(lead)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(cfg)
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx)
	}
	return nil
}

func (e *Election) config(lead func(context.Context)) (leaderelection.LeaderElectionConfig, error) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Client:     e.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	if e.Identity == "" || e.Namespace == "" || e.Name == "" {
		return leaderelection.LeaderElectionConfig{}, fmt.Errorf("leader election: namespace, name and identity are required")
	}
	if e.LeaseDuration > 0 && e.LeaseDuration < time.Second {
		// The Lease holds whole seconds: under one, every candidate sees it expired.
		return leaderelection.LeaderElectionConfig{}, fmt.Errorf("leader election: lease duration %s is under 1s", e.LeaseDuration)
	}
	// A pass still running when leadership ends is waited for: never two passes at once.
	var running sync.WaitGroup
	return leaderelection.LeaderElectionConfig{
		Lock: lock, Name: e.Name, ReleaseOnCancel: true,
		LeaseDuration: orDefault(e.LeaseDuration, DefaultLeaseDuration),
		RenewDeadline: orDefault(e.RenewDeadline, DefaultRenewDeadline),
		RetryPeriod:   orDefault(e.RetryPeriod, DefaultRetryPeriod),
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				running.Add(1)
				defer running.Done()
				e.Log.Infow("leading: this notifier runs the sweeper", "identity", e.Identity, "lease", e.Namespace+"/"+e.Name)
				e.leading(true)
				lead(ctx)
			},
			OnStoppedLeading: func() {
				running.Wait()
				e.leading(false)
			},
			OnNewLeader: func(id string) {
				if id != e.Identity {
					e.Log.Infow("following: another notifier runs the sweeper", "leader", id)
				}
			},
		},
	}, nil
}

func (e *Election) leading(on bool) {
	if e.OnLeading != nil {
		e.OnLeading(on)
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
