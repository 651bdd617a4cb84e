//go:build unix

package ops_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/opsdesk/opsdesk/internal/db"
	"github.com/opsdesk/opsdesk/ops"
)

// Helper processes re-execute this test binary; the environment selects
// what they do.
const (
	envHelperDSN   = "OPSDESK_HELPER_DSN"
	envHelperOwner = "OPSDESK_HELPER_OWNER"
	envHelperTool  = "OPSDESK_HELPER_TOOL"
	envHelperKey   = "OPSDESK_HELPER_KEY"

	// roleHammer runs create-ticket over the hammer keys in shuffled
	// order, round after round, once told to start on stdin.
	roleHammer = "hammer"
	// roleHang starts an external call whose provider never answers.
	roleHang = "hang"

	lineReady   = "helper ready"
	lineCalling = "calling provider"
	lineResult  = "result"

	hammerProcesses = 4
	hammerKeys      = 40
	hammerRounds    = 3

	// helperTimeout bounds a helper process: a hang fails the test
	// instead of hanging CI.
	helperTimeout = 2 * time.Minute
)

// TestHelperProcess is the body of the helper processes the tests below
// start. Run by go test, without the role variable, it does nothing.
func TestHelperProcess(t *testing.T) {
	t.Parallel()
	role := os.Getenv(envHelperRole)
	if role == "" {
		return
	}
	// A process of its own: its own pool and store, nothing from dbtest.
	cfg, err := db.PoolConfig(os.Getenv(envHelperDSN), "opsdesk-helper-"+role)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["search_path"] = ""
	cfg.MaxConns = 4
	pool, err := db.Open(t.Context(), cfg)
	require.NoError(t, err)
	defer pool.Close()
	store, err := ops.New(pool, ops.Config{Tools: testTools, Owner: os.Getenv(envHelperOwner)})
	require.NoError(t, err)
	fmt.Println(lineReady)

	switch role {
	case roleHammer:
		hammer(t, store)
	case roleHang:
		hang(t, store, os.Getenv(envHelperTool), os.Getenv(envHelperKey))
	default:
		t.Fatalf("unknown helper role %q", role)
	}
}

func hammerTicket(k int) (key string, intent ticketIntent) {
	return fmt.Sprintf("k%02d", k), ticketIntent{Title: fmt.Sprintf("Ticket %d", k), Priority: 1 + k%5}
}

// hammer creates every hammer ticket hammerRounds times and prints each
// answer as "result KEY TICKET_ID DISPOSITION".
func hammer(t *testing.T, store *ops.Store) {
	// Wait for the start signal, so that all processes run at once.
	start := bufio.NewScanner(os.Stdin)
	require.True(t, start.Scan(), "no start signal on stdin")
	for range hammerRounds {
		for _, k := range rand.Perm(hammerKeys) {
			key, intent := hammerTicket(k)
			out, err := ops.DoTx(t.Context(), store, ticketReq("acme", key, intent), createTicket("acme", key, intent.Title))
			require.NoError(t, err, key)
			fmt.Println(lineResult, key, out.Result.TicketID, out.Disposition)
		}
	}
}

// hang calls the provider and never returns: the parent kills the process
// while the call is in flight.
func hang(t *testing.T, store *ops.Store, tool, key string) {
	reqs := map[string]func(string) ops.Request{toolEmail: emailReq, toolCharge: chargeReq}
	req, ok := reqs[tool]
	require.True(t, ok, "no request for tool %q", tool)
	_, err := ops.DoExternal(t.Context(), store, req(key), func(_ context.Context, a ops.Attempt) (receipt, error) {
		fmt.Println(lineCalling, a.Key, a.Number)
		select {}
	})
	t.Fatalf("the call returned (%v) instead of hanging until the process was killed", err)
}

// helper is a running helper process.
type helper struct {
	t     *testing.T
	owner string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// lines is the process's stdout, line by line, closed at its end.
	lines  chan string
	stderr bytes.Buffer

	waitOnce sync.Once
	waitErr  error
}

// startHelper starts a helper process in role against b's database and
// returns once it is ready. It is killed, if still running, when t ends.
func startHelper(t *testing.T, b *bundle, role, owner string, env ...string) *helper {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, helperTimeout)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1",
		"-test.timeout="+helperTimeout.String())
	cmd.Env = append(os.Environ(),
		envHelperRole+"="+role,
		envHelperDSN+"="+b.db.ServiceDSN,
		envHelperOwner+"="+owner)
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 10 * time.Second
	h := &helper{t: t, owner: owner, cmd: cmd, lines: make(chan string, 4096)}
	cmd.Stderr = &h.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	h.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)

	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cancel()
		_ = h.wait()
	})
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	h.expect(lineReady)
	return h
}

// expect reads stdout up to the first line starting with prefix.
func (h *helper) expect(prefix string) string {
	h.t.Helper()
	var seen []string
	for line := range h.lines {
		if strings.HasPrefix(line, prefix) {
			return line
		}
		seen = append(seen, line)
	}
	err := h.wait()
	h.t.Fatalf("helper %s ended (%v) before printing %q:\n%s", h.owner, err, prefix, h.output(seen))
	return ""
}

// rest reads stdout to its end.
func (h *helper) rest() []string {
	var out []string
	for line := range h.lines {
		out = append(out, line)
	}
	return out
}

// wait reaps the process, once its stdout has been read to the end.
func (h *helper) wait() error {
	h.waitOnce.Do(func() {
		for range h.lines {
		}
		h.waitErr = h.cmd.Wait()
	})
	return h.waitErr
}

// output is what the process printed, for failure messages. Call it after
// wait.
func (h *helper) output(stdout []string) string {
	return "stdout:\n" + strings.Join(stdout, "\n") + "\nstderr:\n" + h.stderr.String()
}

func TestProcessesHammerOverlappingKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	helpers := make([]*helper, hammerProcesses)
	for i := range helpers {
		helpers[i] = startHelper(t, b, roleHammer, fmt.Sprintf("hammer-%d", i))
	}
	for _, h := range helpers {
		_, err := io.WriteString(h.stdin, "go\n")
		require.NoError(t, err)
		require.NoError(t, h.stdin.Close())
	}

	answers := map[string]map[int64]int{} // key: ticket id: how often answered
	created := map[string]int{}
	for _, h := range helpers {
		out := h.rest()
		require.NoError(t, h.wait(), "helper %s failed:\n%s", h.owner, h.output(out))
		require.Zero(t, h.cmd.ProcessState.ExitCode())
		n, mine := 0, 0
		for _, line := range out {
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != lineResult {
				continue
			}
			n++
			id, err := strconv.ParseInt(f[2], 10, 64)
			require.NoError(t, err, line)
			if answers[f[1]] == nil {
				answers[f[1]] = map[int64]int{}
			}
			answers[f[1]][id]++
			if ops.Disposition(f[3]) == ops.Created {
				created[f[1]]++
				mine++
			} else {
				require.Equal(t, ops.Replayed, ops.Disposition(f[3]), line)
			}
		}
		require.Equal(t, hammerKeys*hammerRounds, n, "helper %s answered every call:\n%s", h.owner, h.output(out))
		t.Logf("helper %s created %d of the %d tickets", h.owner, mine, hammerKeys)
	}

	type row struct {
		Key string
		N   int
		ID  int64
	}
	rows, err := b.db.Admin.Query(b.ctx, `SELECT key, count(*), min(id) FROM biz.tickets WHERE tenant = 'acme' GROUP BY key`)
	require.NoError(t, err)
	var got []row
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.Key, &r.N, &r.ID))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, hammerKeys)
	require.Equal(t, hammerKeys, b.tickets(t))
	for _, r := range got {
		require.Equal(t, 1, r.N, "tickets for %s", r.Key)
		require.Equal(t, map[int64]int{r.ID: hammerProcesses * hammerRounds}, answers[r.Key],
			"every call for %s was answered with its one ticket", r.Key)
		require.Equal(t, 1, created[r.Key], "exactly one call created %s", r.Key)
	}
}

func TestProcessKilledDuringExternalCall(t *testing.T) {
	t.Parallel()

	t.Run("UnknownOutcomeNeedsReconciliation", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const key = "k-killed-charge"
		owner, _ := killMidCall(t, b, toolCharge, key)

		rec := b.waitStuck(t, toolCharge, "acme", key)
		require.Equal(t, owner, rec.Owner)
		p := newProvider()
		_, err := ops.DoExternal(b.ctx, b.store, chargeReq(key), p.send)
		require.ErrorIs(t, err, ops.ErrNeedsReconciliation)
		var needs *ops.NeedsReconciliationError
		require.ErrorAs(t, err, &needs)
		require.Equal(t, owner, needs.Owner)
		require.Equal(t, 1, needs.Attempt)
		require.Empty(t, p.attempts(key), "the provider is not called again")

		rec = b.lookup(t, toolCharge, "acme", key)
		require.Equal(t, ops.StatePending, rec.State)
		require.Equal(t, owner, rec.Owner)
		require.Equal(t, 1, rec.Attempt)
	})

	t.Run("IdempotentProviderIsTakenOver", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		const key = "k-killed-email"
		_, sentKey := killMidCall(t, b, toolEmail, key)

		rec := b.waitStuck(t, toolEmail, "acme", key)
		p := newProvider()
		out, err := ops.DoExternal(b.ctx, b.store, emailReq(key), p.send)
		require.NoError(t, err)
		require.Equal(t, ops.Created, out.Disposition)
		require.Equal(t, 2, out.Attempt)
		require.Equal(t, rec.ID, out.OperationID)
		calls := p.attempts(key)
		require.Len(t, calls, 1)
		require.Equal(t, 2, calls[0].Number)
		require.Equal(t, sentKey, calls[0].Key, "the provider sees the key the killed process sent")

		rec = b.lookup(t, toolEmail, "acme", key)
		require.Equal(t, ops.StateCompleted, rec.State)
		require.Equal(t, ops.OutcomeSucceeded, rec.Outcome)
		require.Equal(t, "worker-1", rec.Owner)
		require.Equal(t, 2, rec.Attempt)
		require.Equal(t, out.Result.ResultRef(), rec.ResultRef)
	})
}

// killMidCall runs tool for key in a helper process and kills it with
// SIGKILL while its provider call is in flight. It returns the helper's
// owner name and the key it sent to the provider.
func killMidCall(t *testing.T, b *bundle, tool, key string) (owner, sentKey string) {
	t.Helper()
	owner = "doomed-" + tool
	h := startHelper(t, b, roleHang, owner, envHelperTool+"="+tool, envHelperKey+"="+key)
	f := strings.Fields(strings.TrimPrefix(h.expect(lineCalling), lineCalling))
	require.Equal(t, []string{key, "1"}, f, "the provider call's key and attempt")

	require.NoError(t, h.cmd.Process.Signal(syscall.SIGKILL))
	err := h.wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	status, ok := exit.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, status.Signaled(), "helper %s: %v\n%s", owner, err, h.output(nil))
	require.Equal(t, syscall.SIGKILL, status.Signal())

	// The dead process's reservation is on record, pending, under its name.
	rec := b.lookup(t, tool, "acme", key)
	require.Equal(t, ops.StatePending, rec.State)
	require.Equal(t, owner, rec.Owner)
	require.Equal(t, 1, rec.Attempt)
	return owner, f[0]
}
