package ops

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// cpuMeter measures the CPU time a benchmark spends in this process and in
// its pool's server backends (read from /proc: the cluster is on this
// machine). Where /proc cannot be read (not Linux), it reports nothing.
type cpuMeter struct {
	pids           []int
	server, client time.Duration
	ok             bool
}

// startCPU holds every connection of pool at once to learn its backends'
// process ids (the pool keeps them open for the run), then reads the
// starting CPU times.
func startCPU(b *testing.B, pool *pgxpool.Pool) *cpuMeter {
	b.Helper()
	ctx := context.Background()
	m := &cpuMeter{}
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, c)
		var pid int
		if err := c.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			b.Fatal(err)
		}
		m.pids = append(m.pids, pid)
	}
	for _, c := range held {
		c.Release()
	}
	m.server, m.client, m.ok = m.read()
	return m
}

// report adds server-µs/op and client-µs/op to the benchmark's line.
func (m *cpuMeter) report(b *testing.B) {
	server, client, ok := m.read()
	if !ok || !m.ok || b.N == 0 {
		return
	}
	b.ReportMetric(float64((server-m.server).Microseconds())/float64(b.N), "server-µs/op")
	b.ReportMetric(float64((client-m.client).Microseconds())/float64(b.N), "client-µs/op")
}

func (m *cpuMeter) read() (server, client time.Duration, ok bool) {
	for _, pid := range m.pids {
		t, err := procCPU(pid)
		if err != nil {
			return 0, 0, false
		}
		server += t
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return server, client, true
}

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU is a process's user and system CPU time, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command (field 2) is in parentheses and may hold spaces: the
	// fields after it start past the last ')'. utime and stime are
	// fields 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var total time.Duration
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		total += time.Duration(n) * clockTick
	}
	return total, nil
}
