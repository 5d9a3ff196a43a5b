package main

import (
	"fmt"
	"net/http"
	"strconv"

	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// newLogReader reads the action logs executors keep in async-helm's own namespace, for
// callers who may read the release (the same check as get and history).
func (f *Function) newLogReader(client kubernetes.Interface) *actionlog.Reader {
	r := &actionlog.Reader{Store: &actionlog.Store{Client: client, Namespace: f.cfg.Namespace}}
	if f.authz != nil { // a nil *Authorizer in the interface would not read as "no authorization"
		r.Authorizer = f.authz
	}
	return r
}

// routeLog serves GET /api/helm/release/log?ns=&name=[&version=][&after=]: 403 for a
// caller who may not read the release, 404 when it has no log.
func (f *Function) routeLog(route routeFunc) {
	route("GET "+api.PathLog, func(w http.ResponseWriter, r *http.Request) error {
		q, err := logQuery(r)
		if err != nil {
			return err
		}
		if f.logs == nil {
			return fmt.Errorf("action logs are not served before submit started")
		}
		out, err := f.logs.Read(r.Context(), userFrom(r.Context()), q)
		if err != nil {
			return err
		}
		function.WriteJSON(w, http.StatusOK, out)
		return nil
	})
}

func logQuery(r *http.Request) (actionlog.Query, error) {
	ns, name, err := nsAndName(r)
	if err != nil {
		return actionlog.Query{}, err
	}
	q := actionlog.Query{Namespace: ns, Name: name}
	if v := r.URL.Query().Get("version"); v != "" {
		if q.Revision, err = strconv.Atoi(v); err != nil || q.Revision < 1 {
			return q, fmt.Errorf("%w: version %q is not a revision", submitter.ErrInvalid, v)
		}
	}
	if v := r.URL.Query().Get("after"); v != "" {
		if q.After, err = strconv.ParseInt(v, 10, 64); err != nil || q.After < 0 {
			return q, fmt.Errorf("%w: after %q is not a line number", submitter.ErrInvalid, v)
		}
	}
	return q, nil
}
