package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/async-helm/async-helm/internal/localstack"
)

// stepTimes are submit's step_duration_seconds sums and counts by step (pkg/submitter's
// ObserveSteps), added over every submit instance.
type stepTimes map[string]struct{ sum, count float64 }

const stepMetric = "asynchelm_submit_step_duration_seconds"

// scrapeSteps reads the step histograms of every submit instance of st.
func scrapeSteps(ctx context.Context, st *localstack.Stack) (stepTimes, error) {
	out := stepTimes{}
	for _, p := range st.Submit.Instances {
		if err := scrapeInstance(ctx, p.URL+"/metrics", out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func scrapeInstance(ctx context.Context, url string, out stepTimes) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		// asynchelm_submit_step_duration_seconds_sum{step="send"} 1.25
		line := sc.Text()
		kind := ""
		switch {
		case strings.HasPrefix(line, stepMetric+"_sum{"):
			kind = "sum"
		case strings.HasPrefix(line, stepMetric+"_count{"):
			kind = "count"
		default:
			continue
		}
		step, rest, ok := strings.Cut(strings.SplitN(line, `step="`, 2)[1], `"}`)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			continue
		}
		e := out[step]
		if kind == "sum" {
			e.sum += v
		} else {
			e.count += v
		}
		out[step] = e
	}
	return sc.Err()
}

// mean is the mean time of step between two scrapes.
func (after stepTimes) mean(before stepTimes, step string) time.Duration {
	n := after[step].count - before[step].count
	if n <= 0 {
		return 0
	}
	return time.Duration((after[step].sum - before[step].sum) / n * float64(time.Second))
}

// note says the mean of each step between two scrapes.
func (after stepTimes) note(before stepTimes) string {
	var parts []string
	for _, s := range []string{"authorize", "chart", "reserve", "send"} {
		parts = append(parts, fmt.Sprintf("%s %s", s, after.mean(before, s).Round(100*time.Microsecond)))
	}
	return "submit's step means: " + strings.Join(parts, ", ")
}
