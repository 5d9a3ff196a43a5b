package ledger

import (
	"fmt"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// filled is a book holding n entries over 100 namespaces and 50 callers.
func filled(n int) *Book {
	b := NewBook(0, nil)
	for i := range n {
		b.Added(Entry{RequestID: fmt.Sprint("r", i), Namespace: fmt.Sprint("ns", i%100), Caller: fmt.Sprint("c", i%50),
			SecretName: fmt.Sprint("s", i), At: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	return b
}

// BenchmarkAdmissionCounts is what admission reads per request, at 10,000 accepted.
func BenchmarkAdmissionCounts(b *testing.B) {
	book := filled(10000)
	for b.Loop() {
		_ = Decide(book.Counts("ns7", "c3"), Limits{Max: 2000, PerNamespace: 1000})
	}
}

// BenchmarkBookChurn is one request accepted and one consumed, at 10,000 accepted.
func BenchmarkBookChurn(b *testing.B) {
	book := filled(10000)
	i := 10000
	for b.Loop() {
		book.Added(Entry{RequestID: fmt.Sprint("r", i), Namespace: fmt.Sprint("ns", i%100), Caller: "c",
			SecretName: fmt.Sprint("s", i), At: t0.Add(time.Duration(i) * time.Millisecond)})
		book.Consumed(consumed.LeaseName(fmt.Sprint("r", i-10000)))
		i++
	}
}

// BenchmarkQueuePosition is one row's position at 10,000 accepted.
func BenchmarkQueuePosition(b *testing.B) {
	book := filled(10000)
	i := 0
	for b.Loop() {
		if _, ok := book.QueuePosition(fmt.Sprint("ns", i%100), fmt.Sprint("s", i%10000)); !ok {
			b.Fatal("not queued")
		}
		i++
	}
}
