// Package actionlog keeps Helm's log of each action: filtered, bounded, one ConfigMap per
// revision in async-helm's own namespace (docs/design.md, "The action's log").
package actionlog

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Bounds of what one Helm log call can add.
const (
	maxArgBytes  = 1024
	maxLineBytes = 4096
	redacted     = "[redacted]"
)

// Format renders one Helm DebugLog call with only what is safe to show: strings, numbers,
// bools, durations and errors (cut at 1 KiB); anything else (a whole Secret) is redacted.
func Format(format string, args ...any) string {
	safe := make([]any, len(args))
	for i, a := range args {
		safe[i] = sanitize(a)
	}
	line := strings.TrimRight(fmt.Sprintf(format, safe...), "\n")
	return cut(line, maxLineBytes)
}

func sanitize(a any) any {
	switch v := a.(type) {
	case nil:
		return a
	case error:
		return cut(v.Error(), maxArgBytes)
	case time.Duration:
		return v
	case schema.GroupVersionKind:
		return v.String()
	case fmt.Stringer:
		// A named string or number type (watch.EventType) prints itself; a struct that is a
		// Stringer (a Secret, a GroupVersionKind) may print data: only its kind is kept.
		if isPlain(reflect.ValueOf(a)) {
			return cut(v.String(), maxArgBytes)
		}
		return redacted
	}
	rv := reflect.ValueOf(a)
	if isPlain(rv) {
		if rv.Kind() == reflect.String {
			return cut(rv.String(), maxArgBytes)
		}
		return a
	}
	if rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.String && rv.Len() <= 16 {
		return cut(fmt.Sprint(a), maxArgBytes) // a Service's external IPs
	}
	return redacted
}

func isPlain(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// cut keeps at most n bytes of s, on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
