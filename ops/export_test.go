package ops

import "time"

// PauseHeartbeat makes s renew its leases only once an hour, as a process
// paused by the scheduler or a long GC would: its leases lapse.
func PauseHeartbeat(s *Store) { s.heartbeat = time.Hour }

// BenchMetrics gives BenchmarkDoTxCreateMetrics its hook: opsprom's, which
// this package's own test files cannot import (opsprom imports ops).
// metrics_test.go sets it.
var BenchMetrics func() Metrics
