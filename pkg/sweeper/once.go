package sweeper

import (
	"sync"

	"go.uber.org/zap"
)

// maxOnceKeys bounds what onceLog remembers: past it, it starts over (a record then logs
// once more), so a tenant writing many bad records cannot grow the notifier's memory.
const maxOnceKeys = 4096

// onceLog logs a warning once per key (a record's namespace/name/resourceVersion), not once
// per sweep or retry: a hostile record must not flood the log either.
type onceLog struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func (o *onceLog) warn(log *zap.SugaredLogger, key, msg string, kv ...any) {
	o.mu.Lock()
	if o.seen == nil || len(o.seen) >= maxOnceKeys {
		o.seen = map[string]struct{}{}
	}
	_, dup := o.seen[key]
	o.seen[key] = struct{}{}
	o.mu.Unlock()
	if !dup {
		log.Warnw(msg, kv...)
	}
}
