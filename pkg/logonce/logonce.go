// Package logonce logs a warning once per key, in bounded memory: a hostile record must
// not flood the log on every pass or retry, nor grow the memory of whoever reads it.
package logonce

import (
	"sync"

	"go.uber.org/zap"
)

// MaxKeys bounds what a Set remembers: past it, it starts over (a key then logs once more).
const MaxKeys = 4096

// Set remembers the keys (a record's kind and UID, say) it logged. Its zero value is ready.
type Set struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// Warn logs msg with kv unless key was logged already.
func (o *Set) Warn(log *zap.SugaredLogger, key, msg string, kv ...any) {
	o.mu.Lock()
	if o.seen == nil || len(o.seen) >= MaxKeys {
		o.seen = map[string]struct{}{}
	}
	_, dup := o.seen[key]
	o.seen[key] = struct{}{}
	o.mu.Unlock()
	if !dup {
		log.Warnw(msg, kv...)
	}
}
