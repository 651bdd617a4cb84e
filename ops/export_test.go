package ops

import "time"

// PauseHeartbeat makes s renew its leases only once an hour, as a process
// paused by the scheduler or a long GC would: its leases lapse.
func PauseHeartbeat(s *Store) { s.heartbeat = time.Hour }
