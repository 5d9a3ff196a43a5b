package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// maxInFlightBytes bounds what the requests submit handles hold of their bodies once
// decoded, a tenant (namespace, caller) a quarter: requests wait in submit (chart fetches,
// values_from), and 50 at api.MaxValueNodes held 862 MiB of its 512 Mi.
const maxInFlightBytes = 256 << 20

// inFlightOverhead is what a request holds beside its body: its goroutine and connection.
const inFlightOverhead = 32 << 10

// inFlight charges a request with a body, before anything decodes it, its bytes and
// bounds.ParsedNodeBytes for each JSON value in it: 429 past its tenant's share of
// maxInFlightBytes.
func (f *Function) inFlight(next function.HandlerFunc) function.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if f.room == nil || r.Method == http.MethodGet || r.Body == nil || r.Body == http.NoBody {
			return next(w, r)
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxEventBytes))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return fmt.Errorf("%w: over %d bytes", errTooLarge, tooLarge.Limit)
		case err != nil:
			return fmt.Errorf("%w: read the body: %v", submitter.ErrInvalid, err)
		}
		var head struct { // skips the values without decoding them
			Namespace string `json:"namespace"`
		}
		_ = json.Unmarshal(body, &head)
		flow := fairqueue.Flow{Namespace: cmp.Or(r.URL.Query().Get("ns"), r.URL.Query().Get("namespace"), head.Namespace)}
		if u := userFrom(r.Context()); u != nil {
			flow.Caller = auth.ShareName(u.Name)
		}
		cost := int64(len(body)) + bounds.ParsedNodeBytes*yamlsize.JSONNodes(body, math.MaxInt64) + inFlightOverhead
		free, ok := f.room.Take(flow, cost)
		if !ok {
			w.Header().Set("Retry-After", "1")
			return function.WithStatus(http.StatusTooManyRequests, fmt.Errorf("this request would hold %d KiB decoded, past its tenant's share of submit's requests in flight (%d MiB): retry later",
				cost>>10, maxInFlightBytes/4>>20))
		}
		defer free()
		r.Body = io.NopCloser(bytes.NewReader(body))
		return next(w, r)
	}
}
