package main

import (
	"context"
	"fmt"

	"github.com/async-helm/async-helm/pkg/api"
)

// openLoops is the submit section's open loop: at each of -rates, raw creates, the one-hop
// floor and submit, latency from the scheduled send time, -repeats rounds with the sides'
// order rotated; the p99 rows are the median round's, with the spread and each side's share
// of the machine's CPU. 200/s is below this machine's knee (p99 <= 2x raw); 400/s is at it
// and stays information.
func (b *bench) openLoops(ctx context.Context, submitURL, hopURL, ns string, raw func(prefix string) func(i int) error,
	req func(name string) api.ReleaseRequest) error {
	// The open loop's clients keep as many idle connections as they may have requests in
	// flight, as the raw creates' HTTP/2 connection carries them all: with 50, a moment's
	// queue at 400/s made them close and open a connection per request (1,020 in 10 s), and
	// p99 went from 97 ms to 3.2 s.
	const inFlight = 1000
	oc := newSubmitClient(submitURL, b.token, inFlight)
	hoc := newSubmitClient(hopURL, b.token, inFlight)
	type perRate struct {
		raw, hop, sub    rounds
		rawBusy, hopBusy []float64
		subBusy          []float64
		conns            int64
	}
	by := map[int]*perRate{}
	for rep := 0; rep < b.o.repeats; rep++ {
		for _, rate := range b.o.rates {
			pr := by[rate]
			if pr == nil {
				pr = &perRate{}
				by[rate] = pr
			}
			sides := []func(){
				func() {
					c0, p0 := readCPUTimes(), snapshotProcs("/proc")
					r := openLoop(ctx, rate, b.o.openFor, inFlight, raw(fmt.Sprintf("open%d-%d-", rate, rep)))
					pr.raw.rounds, pr.rawBusy = append(pr.raw.rounds, r), append(pr.rawBusy, busySince(c0))
					b.logf("  open loop %d/s round %d, raw creates: p99 %s; busiest: %s", rate, rep+1, msF(r.p99), busiest(p0, snapshotProcs("/proc"), 6))
				},
				func() {
					c0, p0 := readCPUTimes(), snapshotProcs("/proc")
					r := openLoop(ctx, rate, b.o.openFor, inFlight, func(i int) error {
						return hoc.install(ctx, req(fmt.Sprintf("hopopen%d-%d-%d", rate, rep, i)))
					})
					pr.hop.rounds, pr.hopBusy = append(pr.hop.rounds, r), append(pr.hopBusy, busySince(c0))
					b.logf("  open loop %d/s round %d, one-hop floor: p99 %s; busiest: %s", rate, rep+1, msF(r.p99), busiest(p0, snapshotProcs("/proc"), 6))
				},
				func() {
					before := stepTimes{}
					_ = scrapeInstance(ctx, submitURL+"/metrics", before)
					c0, p0 := readCPUTimes(), snapshotProcs("/proc")
					r := openLoop(ctx, rate, b.o.openFor, inFlight, func(i int) error {
						return oc.install(ctx, req(fmt.Sprintf("open%d-%d-%d", rate, rep, i)))
					})
					pr.sub.rounds, pr.subBusy = append(pr.sub.rounds, r), append(pr.subBusy, busySince(c0))
					busy := busiest(p0, snapshotProcs("/proc"), 6)
					pr.conns += oc.connsOpened()
					after := stepTimes{}
					if err := scrapeInstance(ctx, submitURL+"/metrics", after); err == nil {
						b.logf("  open loop %d/s round %d: p99 %s (raw %s); %s; busiest: %s", rate, rep+1, msF(r.p99), figure{pr.raw.lastP99(), "ms"}, after.note(before), busy)
					}
				},
			}
			// Raw first in the first round, then rotated: each side runs first once in three.
			for k := range sides {
				sides[(rep+k)%len(sides)]()
			}
			b.purge(ns)
		}
	}
	for _, rate := range b.o.rates {
		pr := by[rate]
		name := fmt.Sprintf("open loop %d/s for %s", rate, b.o.openFor)
		b.compareRepeated("submit", name+": time-to-201 p50", repeatedOf(pr.sub, pr.raw, p50ms), "ms", "raw p50 at the same rate", "", nil,
			fmt.Sprintf("%d connections opened", pr.conns))
		target, check := "", (func(v, base float64) bool)(nil)
		if rate == 200 {
			target, check = "<= 2x", atMost(2) // issue 45: below the knee submit must not queue where raw creates do not
		}
		b.compareRepeated("submit", name+": time-to-201 p99", repeatedOf(pr.sub, pr.raw, p99ms), "ms", "raw p99 at the same rate", target, check,
			fmt.Sprintf("machine CPU busy %s (raw: %s)", percents(pr.subBusy), percents(pr.rawBusy)))
		b.compareRepeated("submit", name+": one-hop floor p99", repeatedOf(pr.hop, pr.raw, p99ms), "ms", "raw p99 at the same rate", "", nil,
			fmt.Sprintf("machine CPU busy %s", percents(pr.hopBusy)))
	}
	return nil
}

// lastP99 is the p99 of the last round, 0 before any.
func (r rounds) lastP99() float64 {
	if len(r.rounds) == 0 {
		return 0
	}
	return p99ms(r.rounds[len(r.rounds)-1])
}

// percents lists shares as percentages.
func percents(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.0f%%", 100*x)
	}
	return s
}
