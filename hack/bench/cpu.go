package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's utime and stime (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU is a process's user plus system CPU so far, from /proc/<pid>/stat; 0 when it is gone.
func procCPU(pid int) time.Duration {
	st, ok := readStat("/proc", pid)
	if !ok {
		return 0
	}
	return st.self
}

// procTreeCPU is the CPU of pid and of every process under it so far: its own, its children's
// that it has waited for (cutime and cstime), and its live descendants' (the executor's render
// workers, which live as long as it does). A child that exits between two reads moves from the
// live ones into its parent's waited-for CPU, so the difference of two reads still holds it.
func procTreeCPU(pid int) time.Duration { return treeCPU("/proc", pid) }

func treeCPU(root string, pid int) time.Duration {
	st, ok := readStat(root, pid)
	if !ok {
		return 0
	}
	total := st.self + st.children
	for _, child := range childrenOf(root, pid) {
		total += treeCPU(root, child)
	}
	return total
}

// procStat is what the CPU rows read of /proc/<pid>/stat.
type procStat struct {
	ppid           int
	self, children time.Duration // utime+stime; cutime+cstime (children waited for)
}

func readStat(root string, pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The command (field 2) may hold spaces: the fields after it start at the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state), f[1] ppid; utime is field 14
	if len(f) < 15 {
		return procStat{}, false
	}
	n := func(k int) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	return procStat{ppid: int(n(1)),
		self:     time.Duration(n(11)+n(12)) * clockTick,
		children: time.Duration(n(13)+n(14)) * clockTick}, true
}

// childrenOf lists the live processes whose parent is pid.
func childrenOf(root string, pid int) []int {
	dirs, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []int
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil || child == pid {
			continue
		}
		if st, ok := readStat(root, child); ok && st.ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// cpuSet names processes whose CPU a measurement adds up.
type cpuSet map[string]int

// read is each process's CPU so far.
func (s cpuSet) read() map[string]time.Duration {
	out := make(map[string]time.Duration, len(s))
	for name, pid := range s {
		out[name] = procCPU(pid)
	}
	return out
}

// with is s and name, as a new set.
func (s cpuSet) with(name string, pid int) cpuSet {
	out := cpuSet{name: pid}
	for k, v := range s {
		out[k] = v
	}
	return out
}

// cpuSince is what each process of s used since before (a read of the same set).
func (s cpuSet) since(before map[string]time.Duration) map[string]time.Duration {
	now := s.read()
	for k, v := range before {
		now[k] -= v
	}
	return now
}

// sumOf adds the named entries of m (every entry when names is empty).
func sumOf(m map[string]time.Duration, names ...string) time.Duration {
	var t time.Duration
	if len(names) == 0 {
		for _, v := range m {
			t += v
		}
		return t
	}
	for _, n := range names {
		t += m[n]
	}
	return t
}

// statePids reads the pids a local tool wrote to its state.json (tools/localcluster beside
// the kubeconfig, tools/knative under KNATIVE_DIR).
func statePids(dir string) (map[string]int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, err
	}
	var st struct {
		Pids map[string]int `json:"pids"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s/state.json: %w", dir, err)
	}
	return st.Pids, nil
}

// clusterCPU is the local cluster's API server and etcd, found from the kubeconfig's
// directory (the local cluster's state): the CPU a Secret create costs the cluster.
func (b *bench) clusterCPU() (cpuSet, error) {
	pids, err := statePids(filepath.Dir(b.kubeconfig))
	if err != nil {
		return nil, fmt.Errorf("the local cluster's processes (CPU rows need make cluster-up's cluster): %w", err)
	}
	s := cpuSet{}
	for _, name := range []string{"apiserver", "etcd"} {
		if pids[name] == 0 {
			return nil, fmt.Errorf("no %s pid in %s/state.json", name, filepath.Dir(b.kubeconfig))
		}
		s[name] = pids[name]
	}
	return s, nil
}

// msPer is d per n, in milliseconds.
func msPer(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / 1000 / float64(n)
}

// cpuNote lists each process's CPU per unit, largest first.
func cpuNote(m map[string]time.Duration, n int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return m[names[i]] > m[names[j]] })
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, msPer(m[k], n)))
	}
	return strings.Join(parts, ", ")
}

// repeated is one figure measured in several repetitions within the run: the verdict is
// the median ratio's, and the spread of the ratios goes in the note.
type repeated struct {
	values, bases []float64
}

func (r *repeated) add(value, base float64) {
	r.values, r.bases = append(r.values, value), append(r.bases, base)
}

// median returns the repetition whose ratio is the median (the lower middle for an even
// count), and the smallest and largest ratio.
func (r *repeated) median() (value, base, lo, hi float64) {
	idx := make([]int, 0, len(r.values))
	for i := range r.values {
		if r.bases[i] > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return 0, 0, 0, 0
	}
	ratio := func(i int) float64 { return r.values[i] / r.bases[i] }
	sort.Slice(idx, func(a, b int) bool { return ratio(idx[a]) < ratio(idx[b]) })
	m := idx[(len(idx)-1)/2]
	return r.values[m], r.bases[m], ratio(idx[0]), ratio(idx[len(idx)-1])
}

// spreadNote says how many repetitions there were and their ratios' range.
func (r *repeated) spreadNote() string {
	_, _, lo, hi := r.median()
	ratios := make([]string, 0, len(r.values))
	for i := range r.values {
		if r.bases[i] > 0 {
			ratios = append(ratios, ratioText(r.values[i]/r.bases[i]))
		}
	}
	return fmt.Sprintf("median of %d: %s; spread %s-%s", len(ratios), strings.Join(ratios, " "), ratioText(lo), ratioText(hi))
}

// compareRepeated adds the median repetition's row, with the spread in its note.
func (b *bench) compareRepeated(section, name string, r *repeated, unit, baseName, target string, check func(v, base float64) bool, note string) {
	v, base, _, _ := r.median()
	if note != "" {
		note = r.spreadNote() + "; " + note
	} else {
		note = r.spreadNote()
	}
	b.compare(section, name, figure{v, unit}, baseName, figure{base, unit}, target, check, note)
}
