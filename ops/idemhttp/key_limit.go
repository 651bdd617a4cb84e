package idemhttp

import (
	"sync"
	"time"
)

// KeyLimit bounds how many new keys a tenant may start (Config.NewKeys):
// Keys per Per, in a burst of up to Keys, refilled evenly. The zero value
// is no limit.
type KeyLimit struct {
	Keys int
	Per  time.Duration
}

// maxIdleBuckets is how many tenants' limits are kept before those whose
// bucket is full again (they lose nothing by being forgotten) are dropped.
const maxIdleBuckets = 4096

// keyLimiter is a token bucket per tenant, in this process.
type keyLimiter struct {
	mu      sync.Mutex
	burst   float64
	perKey  float64 // the nanoseconds one key's token takes to come back
	buckets map[string]*keyBucket
}

type keyBucket struct {
	tokens float64
	at     time.Time
}

func newKeyLimiter(l KeyLimit) *keyLimiter {
	if l.Keys == 0 {
		return nil
	}
	return &keyLimiter{burst: float64(l.Keys), perKey: float64(l.Per) / float64(l.Keys), buckets: map[string]*keyBucket{}}
}

// take spends one of tenant's tokens, or returns how long until it has
// one.
func (l *keyLimiter) take(tenant string, now time.Time) (wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[tenant]
	if !ok {
		if len(l.buckets) >= maxIdleBuckets {
			l.forgetFull(now)
		}
		b = &keyBucket{tokens: l.burst, at: now}
		l.buckets[tenant] = b
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return max(time.Duration((1-b.tokens)*l.perKey), time.Nanosecond)
}

func (l *keyLimiter) refill(b *keyBucket, now time.Time) {
	if now.After(b.at) {
		b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.at))/l.perKey)
	}
	b.at = now
}

func (l *keyLimiter) forgetFull(now time.Time) {
	for tenant, b := range l.buckets {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.buckets, tenant)
		}
	}
}
