package source

import (
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// ahead ends its goroutine when the scan stops early (stop would wait forever otherwise),
// and hands the reader's error on as it is: the refusal stays in the same words.
func TestAheadStopsWithTheScanAndKeepsItsError(t *testing.T) {
	r, stop := ahead(zeros{})
	if _, err := io.ReadFull(r, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	stop()
	corrupt := errors.New("flate: corrupt input before offset 7")
	r, stop = ahead(iotest.ErrReader(corrupt))
	defer stop()
	if _, err := io.ReadAll(r); err != corrupt {
		t.Fatalf("got %v, want the reader's own error", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
