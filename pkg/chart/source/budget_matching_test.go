package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// unmatched is a chart whose Chart.yaml lists entries dependencies named x, each under its
// own alias with a constraint of groups ">=9.9.9" no subchart meets, beside subs directory
// subcharts named x: Helm matches every entry against every subchart.
func unmatched(t *testing.T, name string, entries, subs, groups int) []entry {
	t.Helper()
	constraint := strings.TrimSuffix(strings.Repeat(">=9.9.9 || ", groups), " || ")
	var top strings.Builder
	fmt.Fprintf(&top, "apiVersion: v2\nname: %s\nversion: 1.0.0\ndependencies:\n", name)
	for i := range entries {
		fmt.Fprintf(&top, "- {name: x, alias: a%d, version: %q}\n", i, constraint)
	}
	es := []entry{{Name: name + "/Chart.yaml", Data: []byte(top.String())}}
	for j := range subs {
		es = append(es, entry{Name: fmt.Sprintf("%s/charts/s%d/Chart.yaml", name, j), Data: []byte("apiVersion: v2\nname: x\nversion: 1.0.0\n")})
	}
	return es
}

// Helm matches each Chart.yaml entry against each subchart of its name, a semver constraint
// parse a pair: 400 entries by 400 subcharts (6 KiB on the wire) took 54.6 s of CPU to load
// and as much again in each of the executor's dependency passes. The budget charges that
// matching before any of it is done and refuses the chart (GitLab's: TestImportValuesAreChargedTheTablesTheyName).
func TestDependencyMatchingIsChargedToTheBudget(t *testing.T) {
	a := tgz(t, unmatched(t, "top", 400, 400, 32)...)
	if _, err := (Budget{}).Load(a); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more dependency matching than") {
		t.Errorf("400 x 400 (%d bytes on the wire): Load %v, want it refused for its dependency matching", len(a), err)
	}
}

// A subchart's matching is done again in each copy Helm makes of it (one per alias): a
// subchart within the bound alone (about a fifth of it) is refused once aliased eight times.
func TestDependencyMatchingCountsEachCopy(t *testing.T) {
	groups := bounds.MaxDependencyMatching / 5 / (20 * 20) / len(">=9.9.9 || ")
	sub := tgz(t, unmatched(t, "sub", 20, 20, groups)...)
	top := func(aliases int) []byte {
		var y strings.Builder
		y.WriteString("apiVersion: v2\nname: top\nversion: 1.0.0\ndependencies:\n")
		for i := range aliases {
			fmt.Fprintf(&y, "- {name: sub, alias: s%d, version: 1.0.0}\n", i)
		}
		return tgz(t, entry{Name: "top/Chart.yaml", Data: []byte(y.String())}, entry{Name: "top/charts/sub-1.0.0.tgz", Data: sub})
	}
	if _, err := (Budget{}).Load(top(1)); err != nil {
		t.Errorf("the subchart once: %v", err)
	}
	if _, err := (Budget{}).Load(top(8)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more dependency matching than") {
		t.Errorf("the subchart aliased 8 times: %v, want it refused for its dependency matching", err)
	}
}

// The budget's own matching parses each (constraint, version) pair once, however many
// entries and subcharts repeat it.
func TestEntriesOfMatchesEachPairOnce(t *testing.T) {
	ch, err := (Budget{}).Load(tgz(t, unmatched(t, "top", 50, 50, 2)...))
	if err != nil {
		t.Fatal(err)
	}
	s := aliasScan{ctx: context.Background(), room: charged{matching: bounds.MaxDependencyMatching}, compatible: map[[2]string]bool{}}
	if _, _, ok := s.entriesOf(ch); !ok || len(s.compatible) != 1 {
		t.Errorf("50 entries x 50 subcharts of one constraint and version: %d pairs matched, want 1", len(s.compatible))
	}
}

// A load whose request has ended stops: in the scan, and in the dependency matching (the
// steps whose work a hostile chart sets), so it frees its load slot for whoever waits.
func TestALoadWhoseRequestEndedStops(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	archive := tgz(t, unmatched(t, "top", 50, 50, 2)...)
	if _, _, err := DefaultBudget.load(ended, archive); !errors.Is(err, context.Canceled) {
		t.Errorf("the load of an ended request: %v, want it stopped", err)
	}
	ch, c, err := DefaultBudget.load(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := DefaultBudget.chargeAliases(ended, ch, &c); !errors.Is(err, context.Canceled) {
		t.Errorf("the dependency matching of an ended request: %v, want it stopped", err)
	}
	if _, _, err := (&Source{}).load(ended, Tenant{Namespace: "a"}, archive); !errors.Is(err, context.Canceled) {
		t.Errorf("the source's load for an ended request: %v, want it stopped", err)
	}
}

// The load slots are shared between tenants: with the one slot held by tenant a, and a's
// next load waiting first, the freed slot goes to tenant b, who holds none (with a plain
// channel, the first to wait got it).
func TestLoadSlotsGoToTheTenantHoldingFewest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &Source{MaxParallelLoads: 1}
		src.loadsOnce.Do(func() { src.loads = fairqueue.New(1, fairqueue.Options{}) })
		a, b := Tenant{Namespace: "a", Caller: "a"}, Tenant{Namespace: "b", Caller: "b"}
		held, ok := src.loads.TryAcquire(a)
		if !ok {
			t.Fatal("no free load slot")
		}
		archive := tgz(t, chartYAML("tiny"))
		got := make(chan string, 2)
		for _, who := range []Tenant{a, b} {
			go func() {
				if _, _, err := src.load(context.Background(), who, archive); err == nil {
					got <- who.Namespace
				}
			}()
			synctest.Wait()
		}
		held.Release()
		if first := <-got; first != "b" {
			t.Errorf("the freed load slot went to tenant %s, want b", first)
		}
		<-got
	})
}
