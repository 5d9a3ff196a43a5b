package api

import (
	"fmt"
	"net/url"
	"strconv"
)

// QueryNoHooks runs no delete hook (Helm's --no-hooks): DELETE PathAsync?ns=&name=&no_hooks=true.
const QueryNoHooks = "no_hooks"

// UninstallOptions are what an uninstall asks beyond the release and its revision.
type UninstallOptions struct {
	// NoHooks runs none of the record's delete hooks.
	NoHooks bool
}

// ParseUninstallQuery reads the options from an uninstall's query; a no_hooks that is not
// a boolean is refused (strconv.ParseBool's forms; absent or empty is false).
func ParseUninstallQuery(q url.Values) (UninstallOptions, error) {
	var o UninstallOptions
	if v := q.Get(QueryNoHooks); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return o, fmt.Errorf("%s=%q: want true or false", QueryNoHooks, v)
		}
		o.NoHooks = b
	}
	return o, nil
}

// Query is o as an uninstall's query parameters, added to q.
func (o UninstallOptions) Query(q url.Values) {
	if o.NoHooks {
		q.Set(QueryNoHooks, "true")
	}
}
