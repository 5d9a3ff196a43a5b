package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// procSnapshot is every process's own CPU so far (utime+stime), by pid, with its command:
// what a side of a measurement shared the machine with.
type procSnapshot struct {
	at   time.Time
	cpu  map[int]time.Duration
	comm map[int]string
}

// snapshotProcs reads every process under root (/proc).
func snapshotProcs(root string) procSnapshot {
	s := procSnapshot{at: time.Now(), cpu: map[int]time.Duration{}, comm: map[int]string{}}
	dirs, err := os.ReadDir(root)
	if err != nil {
		return s
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(root, pid)
		if !ok {
			continue
		}
		s.cpu[pid] = st.self
		if b, err := os.ReadFile(filepath.Join(root, d.Name(), "comm")); err == nil {
			s.comm[pid] = strings.TrimSpace(string(b))
		}
	}
	return s
}

// busiest is the n commands that used the most CPU between before and after, as shares of
// one core over the wall time between the snapshots ("kube-apiserver 61%, etcd 20%"), the
// processes of one command summed; a process started between them counts from zero.
func busiest(before, after procSnapshot, n int) string {
	wall := after.at.Sub(before.at)
	if wall <= 0 {
		return ""
	}
	by := map[string]time.Duration{}
	for pid, c := range after.cpu {
		if d := c - before.cpu[pid]; d > 0 {
			by[after.comm[pid]] += d
		}
	}
	names := make([]string, 0, len(by))
	for name := range by {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if by[names[i]] != by[names[j]] {
			return by[names[i]] > by[names[j]]
		}
		return names[i] < names[j]
	})
	parts := []string{}
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", name, 100*by[name].Seconds()/wall.Seconds()))
	}
	return strings.Join(parts, ", ")
}
