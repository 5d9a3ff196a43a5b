package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/satoken"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// submitSection: time-to-201 and accepted/s against raw Secret creates of the same size,
// closed loop at 1 client and at -clients, open loop at fixed rates, distinct users, and
// the chart cache cold and warm. Events go to a sink that acknowledges at once (nothing
// executes): this is submit's own path.
func (b *bench) submitSection(ctx context.Context) error {
	s, err := newSink(nil)
	if err != nil {
		return err
	}
	defer s.close()
	p, err := b.submitProc(s.url)
	if err != nil {
		return err
	}
	defer p.Stop()
	ns, cleanup, err := b.namespace(ctx, "submit")
	if err != nil {
		return err
	}
	defer cleanup()
	tiny := b.charts.ChartURL("tiny", "0.1.0")
	c := newSubmitClient(p.URL, b.token, b.o.clients)
	req := func(name string) api.ReleaseRequest {
		return api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: tiny, Values: map[string]any{"message": "bench"}}
	}
	// The first request fills the chart and authorization caches; its reservation is the
	// template of the raw creates (same size, same labels).
	if err := b.retryNamespace(ctx, func() error { return c.install(ctx, req("warm")) }); err != nil {
		return fmt.Errorf("warm-up install: %w", err)
	}
	tmpl, err := b.cl.Typed.CoreV1().Secrets(ns).Get(ctx, release.SecretName("warm", 1), metav1.GetOptions{})
	if err != nil {
		return err
	}
	size := 0
	for _, v := range tmpl.Data {
		size += len(v)
	}
	b.logf("  reservation secret: %d bytes of data, %d labels", size, len(tmpl.Labels))
	rawNS, rawCleanup, err := b.namespace(ctx, "raw")
	if err != nil {
		return err
	}
	defer rawCleanup()
	raw := func(prefix string) func(i int) error {
		return func(i int) error { return b.rawCreate(ctx, rawNS, tmpl, fmt.Sprintf("%s%d", prefix, i)) }
	}
	sub := func(prefix string) func(i int) error {
		return func(i int) error { return c.install(ctx, req(fmt.Sprintf("%s%d", prefix, i))) }
	}
	hopURL, stopHop, err := b.startHopFloor(tmpl, rawNS)
	if err != nil {
		return err
	}
	defer stopHop()
	hc := newSubmitClient(hopURL, b.token, b.o.clients)
	hop := func(prefix string) func(i int) error {
		return func(i int) error { return hc.install(ctx, req(fmt.Sprintf("hop%s%d", prefix, i))) }
	}
	const sec = "submit"
	// The closed loops rotate raw, hop and submit rounds (closedLoopRounds): one run after
	// another, the raw floor moved by 25% between runs on the same cluster.
	floor := fmt.Sprintf("raw Secret create (%d B)", size)

	// Closed loop, 1 client, then many: -repeats rounds each side, the order rotated; the
	// verdicts are the median round's.
	oneRounds := closedLoopRounds(b.o.single*b.o.repeats, 1, b.o.repeats, raw("one"), sub("one"))
	f1, s1 := oneRounds[0], oneRounds[1]
	b.logRounds("closed loop, 1 client", []string{"raw", "submit"}, oneRounds)
	b.compare(sec, "time-to-201 p50, 1 client", msF(s1.all.p50), floor+" p50", msF(f1.all.p50), "", nil, s1.all.note())
	b.compareRepeated(sec, "time-to-201 p99, 1 client", repeatedOf(s1, f1, p99ms), "ms", floor+" p99", "<= raw + 5 ms", plusAtMost(5), "")
	b.compareRepeated(sec, "accepted/s, 1 client", repeatedOf(s1, f1, rateOf), "/s", "raw creates/s", "", nil, "")
	b.purge(ns)

	c.connsOpened()
	rs := closedLoopRounds(b.o.concurrent, b.o.clients, b.o.repeats, raw("many"), hop("many"), sub("many"))
	fN, hN, sN := rs[0], rs[1], rs[2]
	b.logRounds(fmt.Sprintf("closed loop, %d clients", b.o.clients), []string{"raw", "one-hop floor", "submit"}, rs)
	b.logf("  closed loop, %d clients, %d rounds each: %d connections opened", b.o.clients, b.o.repeats, c.connsOpened())
	nc := fmt.Sprintf("%d clients", b.o.clients)
	b.compare(sec, "time-to-201 p50, "+nc, msF(sN.all.p50), floor+" p50", msF(fN.all.p50), "", nil, sN.all.note())
	b.compareRepeated(sec, "time-to-201 p99, "+nc, repeatedOf(sN, fN, p99ms), "ms", floor+" p99", "<= 1.3x", atMost(1.3), "")
	b.compareRepeated(sec, "accepted/s, "+nc, repeatedOf(sN, fN, rateOf), "/s", "raw creates/s", ">= 0.8x", atLeast(0.8), "")
	b.compare(sec, "one-hop floor: answered/s, "+nc, rateF(hN.all.rate), "raw creates/s", rateF(fN.all.rate), "", nil,
		fmt.Sprintf("submit at %.2fx of this floor", sN.all.rate/hN.all.rate))
	b.compare(sec, "one-hop floor: time-to-201 p99, "+nc, msF(hN.all.p99), floor+" p99", msF(fN.all.p99), "", nil, hN.all.note())
	b.purge(ns)
	if err := b.openLoops(ctx, p.URL, hopURL, ns, raw, req); err != nil {
		return err
	}
	if err := b.distinctUsers(ctx, p.URL, tiny); err != nil {
		return err
	}
	return b.chartCache(ctx)
}

// retryNamespace retries fn while submit's namespace cache has not seen a just-created namespace.
func (b *bench) retryNamespace(ctx context.Context, fn func() error) error {
	var err error
	for i := 0; i < 100; i++ {
		if err = fn(); err == nil || !strings.HasPrefix(err.Error(), "404") {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return err
}

// rawCreate creates a copy of tmpl named name: the floor of a path that creates one Secret.
func (b *bench) rawCreate(ctx context.Context, ns string, tmpl *corev1.Secret, name string) error {
	labels := map[string]string{}
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	labels[release.LabelName] = name
	// Same size, but not a release record (owner is not "helm"): no notifier or submit in
	// the cluster takes it for pending work.
	labels[release.LabelOwner] = "bench"
	_, err := b.cl.Typed.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1), Labels: labels, Annotations: tmpl.Annotations},
		Type:       tmpl.Type, Data: tmpl.Data,
	}, metav1.CreateOptions{})
	return err
}

// distinctUsers: the same load from -users ServiceAccounts, each with its own RoleBinding
// (so TokenReview, the API server's token cache and submit's access checks start cold for
// each), against one user.
func (b *bench) distinctUsers(ctx context.Context, submitURL, chartURL string) error {
	ns, cleanup, err := b.namespace(ctx, "users")
	if err != nil {
		return err
	}
	defer cleanup()
	tokens := make([]string, b.o.users)
	for i := range tokens {
		sa := fmt.Sprintf("user%d", i)
		if _, err := b.cl.Typed.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if _, err := b.cl.Typed.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}, metav1.CreateOptions{}); err != nil {
			return err
		}
		if tokens[i], err = satoken.Request(ctx, b.cl.Typed, ns, sa, time.Hour); err != nil {
			return err
		}
	}
	// RBAC sees new bindings a moment later: wait until the last user may create, with a
	// client that is not submit (its caches must stay cold).
	if err := b.waitAllowed(ctx, ns, fmt.Sprintf("system:serviceaccount:%s:user%d", ns, b.o.users-1)); err != nil {
		return err
	}
	req := func(name string) api.ReleaseRequest {
		return api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chartURL, Values: map[string]any{"message": "bench"}}
	}
	n := b.o.users * b.o.perUser
	one := newSubmitClient(submitURL, b.token, b.o.users)
	if err := b.retryNamespace(ctx, func() error { return one.install(ctx, req("onewarm")) }); err != nil {
		return err
	}
	r1 := closedLoop(n, b.o.users, func(i int) error { return one.install(ctx, req(fmt.Sprintf("one%d", i))) })
	clients := make([]*submitClient, b.o.users)
	for i := range clients {
		clients[i] = newSubmitClient(submitURL, tokens[i], 1)
	}
	// Request i goes from user i%users: the first request of each user is cold.
	first := make([]sample, b.o.users)
	rN := closedLoop(n, b.o.users, func(i int) error {
		t0 := time.Now()
		err := clients[i%b.o.users].install(ctx, req(fmt.Sprintf("many%d", i)))
		if i < b.o.users {
			first[i] = sample{time.Since(t0), err}
		}
		return err
	})
	cold := summarize(first, 0)
	const sec = "submit"
	name := fmt.Sprintf("%d distinct users, %d clients", b.o.users, b.o.users)
	b.compare(sec, name+": time-to-201 p50", msF(rN.p50), "one user p50", msF(r1.p50), "", nil, rN.note())
	b.compare(sec, name+": time-to-201 p99", msF(rN.p99), "one user p99", msF(r1.p99), "", nil, r1.note())
	b.compare(sec, name+": each user's first (cold) request p99", msF(cold.p99), "one user p99", msF(r1.p99), "", nil, cold.note())
	return nil
}

// allowed asks the API server whether user may create secrets in ns.
func (b *bench) allowed(ctx context.Context, ns, user string) (bool, error) {
	r, err := b.cl.Typed.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns},
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: ns},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

func (b *bench) waitAllowed(ctx context.Context, ns, user string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := b.allowed(ctx, ns, user)
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not allowed to create secrets in %s after 30s: %v", user, ns, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chartCache: time-to-201 of the first request for a chart after submit started (cold:
// download, verify, load) against the requests after it (warm), for tiny and for GitLab.
// Each cold sample is a fresh submit whose authorization cache was warmed with another chart.
func (b *bench) chartCache(ctx context.Context) error {
	gitlabValues, err := chartutil.ReadValuesFile(filepath.Join(b.o.charts, "gitlab-values-offline.yaml"))
	if err != nil {
		return err
	}
	ns, cleanup, err := b.namespace(ctx, "cache")
	if err != nil {
		return err
	}
	defer cleanup()
	s, err := newSink(nil)
	if err != nil {
		return err
	}
	defer s.close()
	for _, ch := range []struct {
		name, version string
		values        map[string]any
	}{{"tiny", "0.1.0", map[string]any{"message": "bench"}}, {"gitlab", "6.5.4", gitlabValues}} {
		var cold, warm []sample
		for run := 0; run < b.o.cacheRuns; run++ {
			p, err := b.submitProc(s.url)
			if err != nil {
				return err
			}
			c := newSubmitClient(p.URL, b.token, 1)
			send := func(name, chartURL string, values map[string]any) sample {
				t0 := time.Now()
				err := c.install(ctx, api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chartURL, Values: values})
				return sample{time.Since(t0), err}
			}
			prefix := fmt.Sprintf("%s%d-", ch.name, run)
			if err := b.retryNamespace(ctx, func() error {
				return send(prefix+"auth", b.charts.ChartURL("hookfail", "0.1.0"), nil).err
			}); err != nil {
				p.Stop()
				return fmt.Errorf("warm-up of the access checks: %w", err)
			}
			cold = append(cold, send(prefix+"cold", b.charts.ChartURL(ch.name, ch.version), ch.values))
			for i := 0; i < 5; i++ {
				warm = append(warm, send(fmt.Sprintf("%swarm%d", prefix, i), b.charts.ChartURL(ch.name, ch.version), ch.values))
			}
			p.Stop()
		}
		c, w := summarize(cold, 0), summarize(warm, 0)
		b.compare("submit", fmt.Sprintf("chart cache cold, %s: time-to-201 p50 of %d fresh submits", ch.name, len(cold)),
			msF(c.p50), "warm p50", msF(w.p50), "", nil, c.note())
		if ch.name == "gitlab" {
			b.gitlabCold = cold
		}
	}
	return nil
}

// logRounds logs each round of each side with what used the machine meanwhile, so a round
// that swung shows what it shared the machine with.
func (b *bench) logRounds(name string, sides []string, rs []rounds) {
	for j, side := range sides {
		for i, r := range rs[j].rounds {
			b.logf("  %s round %d, %s: p50 %s p99 %s, %.0f/s; busiest: %s", name, i+1, side, msF(r.p50), msF(r.p99), r.rate, r.busiest)
		}
	}
}
