package host

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports (the kernel exports a
// fixed value to user space whatever its internal HZ).
const clockTicks = 100

// CPUTime reads the user plus system CPU time a process has used so far
// from /proc/<pid>/stat (fields 14 and 15, utime and stime).
func CPUTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU extracts utime+stime from the text of /proc/<pid>/stat. The
// command name (field 2) is in parentheses and may hold spaces or
// parentheses itself, so fields are counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// After the name: state is field 3, so utime (14) is f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the name, want at least 13", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad utime/stime %q %q", f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// CPUUse is the CPU a process used over a measured interval.
type CPUUse struct {
	Name string `json:"name"`
	// Seconds is the CPU time used; Cores is Seconds per second of the
	// interval (1 = one core busy all the time).
	Seconds float64 `json:"cpu_seconds"`
	Cores   float64 `json:"cores"`
}

// CPUMeter measures named processes' CPU over an interval: Start reads
// every counter, Stop reads them again.
type CPUMeter struct {
	pids   map[string]int
	before map[string]time.Duration
	at     time.Time
}

// NewCPUMeter meters the named processes and this one (the clients).
func NewCPUMeter(pids map[string]int) *CPUMeter {
	m := &CPUMeter{pids: map[string]int{}}
	for k, v := range pids {
		m.pids[k] = v
	}
	m.pids["llm-bench (clients)"] = os.Getpid()
	return m
}

// Start reads every process's counters.
func (m *CPUMeter) Start() {
	m.before = map[string]time.Duration{}
	for name, pid := range m.pids {
		if t, err := CPUTime(pid); err == nil {
			m.before[name] = t
		}
	}
	m.at = time.Now()
}

// Stop returns each process's use since start, sorted by name, and the
// total in cores.
func (m *CPUMeter) Stop() ([]CPUUse, float64) {
	wall := time.Since(m.at).Seconds()
	var out []CPUUse
	total := 0.0
	for name, pid := range m.pids {
		t, err := CPUTime(pid)
		b, ok := m.before[name]
		if err != nil || !ok {
			continue
		}
		u := CPUUse{Name: name, Seconds: (t - b).Seconds()}
		if wall > 0 {
			u.Cores = u.Seconds / wall
		}
		total += u.Cores
		out = append(out, u)
	}
	sortCPU(out)
	return out, total
}

func sortCPU(us []CPUUse) {
	slices.SortFunc(us, func(a, b CPUUse) int { return strings.Compare(a.Name, b.Name) })
}

// MachineMeter measures the whole machine's busy share from the first
// line of /proc/stat: every process, ours or not, on every core.
type MachineMeter struct {
	busy, total int64
	ok          bool
}

// NewMachineMeter meters the whole machine.
func NewMachineMeter() *MachineMeter { return &MachineMeter{} }

// Start reads the machine's counters.
func (m *MachineMeter) Start() {
	m.busy, m.total, m.ok = readProcStat()
}

// Stop returns the busy share of all cores since start (0..1), or -1 when
// /proc/stat is unreadable.
func (m *MachineMeter) Stop() float64 {
	busy, total, ok := readProcStat()
	if !ok || !m.ok || total <= m.total {
		return -1
	}
	return float64(busy-m.busy) / float64(total-m.total)
}

func readProcStat() (busy, total int64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseProcStatCPU(line)
}

// parseProcStatCPU reads the aggregate "cpu" line: user nice system idle
// iowait irq softirq steal ...; idle and iowait are not busy. Guest time
// is already counted in user.
func parseProcStatCPU(line string) (busy, total int64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		if i >= 8 { // guest, guest_nice: inside user already
			break
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return busy, total, true
}
