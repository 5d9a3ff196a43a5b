package main

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/async-helm/async-helm/pkg/reader"
)

// answerTime bounds the write of a read's answer: its read slot, and the records the
// answer is written from, are held until it is written.
const answerTime = time.Minute

// list answers the releases of ?ns= (every namespace the caller may read when empty).
func (f *Function) list(w http.ResponseWriter, r *http.Request) error {
	limit, _ := strconv.ParseBool(r.URL.Query().Get("limitInfo"))
	var done func()
	out, err := f.reads.List(r.Context(), userFrom(r.Context()), r.URL.Query().Get("ns"), limit, reader.UntilWritten(&done))
	return answer(w, out, err, done)
}

// get answers the latest revision of ?ns=&name=.
func (f *Function) get(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := nsAndName(r)
	if err != nil {
		return err
	}
	var done func()
	out, err := f.reads.Latest(r.Context(), userFrom(r.Context()), ns, name, reader.UntilWritten(&done))
	return answer(w, out, err, done)
}

// history answers every revision of ?ns=&name=.
func (f *Function) history(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := nsAndName(r)
	if err != nil {
		return err
	}
	var done func()
	out, err := f.reads.History(r.Context(), userFrom(r.Context()), ns, name, reader.UntilWritten(&done))
	return answer(w, out, err, done)
}

// answer writes a read's answer, or returns its error, then gives its read slot back.
func answer(w http.ResponseWriter, out any, err error, done func()) error {
	defer done()
	if err == nil {
		writeAnswer(w, out)
	}
	return err
}

// writeAnswer answers v as JSON within answerTime, a list one row at a time, each dropped
// once written (not the whole answer encoded at once). HTML is not escaped: a tenant's
// manifest of '<' would be encoded six times its size.
func writeAnswer(w http.ResponseWriter, v any) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerTime)) // until the request ends
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	rows := reflect.ValueOf(v)
	if rows.Kind() != reflect.Slice || rows.IsNil() {
		_ = enc.Encode(v)
		return
	}
	sep := "["
	for i := range rows.Len() {
		if _, err := io.WriteString(w, sep); err != nil || enc.Encode(rows.Index(i).Interface()) != nil {
			return // the client is gone or too slow: the connection ends
		}
		rows.Index(i).SetZero()
		sep = ","
	}
	if sep == "[" {
		_, _ = io.WriteString(w, sep)
	}
	_, _ = io.WriteString(w, "]\n")
}
