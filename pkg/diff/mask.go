package diff

import (
	"encoding/base64"
	"fmt"

	"sigs.k8s.io/yaml"
)

// maskSecrets masks a Secret's data and stringData as helm-diff ("-------- # (N bytes)", "++++++++",
// "REDACTED" when equal); either may be nil; one that does not parse is hidden whole.
func maskSecrets(before, after *Object) {
	b, bok := secretOf(before)
	a, aok := secretOf(after)
	if (before != nil && !bok) || (after != nil && !aok) {
		hideWhole(before, after)
		return
	}
	for _, field := range []string{"data", "stringData"} {
		maskField(field, b, a)
	}
	rewrite(before, b)
	rewrite(after, a)
}

// maskField masks the values of one field of a Secret on both sides.
func maskField(field string, b, a map[string]any) {
	bm, _ := b[field].(map[string]any)
	am, _ := a[field].(map[string]any)
	size := func(v any) int { return valueSize(field, v) }
	for k, v := range bm {
		bs := fmt.Sprint(v)
		if av, ok := am[k]; ok && fmt.Sprint(av) == bs {
			bm[k] = fmt.Sprintf("REDACTED # (%d bytes)", size(v))
			am[k] = bm[k]
			continue
		}
		bm[k] = fmt.Sprintf("-------- # (%d bytes)", size(v))
		if av, ok := am[k]; ok {
			am[k] = fmt.Sprintf("++++++++ # (%d bytes)", size(av))
		}
	}
	for k, v := range am {
		if _, ok := bm[k]; !ok {
			am[k] = fmt.Sprintf("++++++++ # (%d bytes)", size(v))
		}
	}
}

// hideWhole replaces Secrets that do not parse by a line with their size.
func hideWhole(before, after *Object) {
	changed := before == nil || after == nil || before.Text != after.Text
	for _, side := range []struct {
		o    *Object
		mark string
	}{{before, "--------"}, {after, "++++++++"}} {
		if side.o == nil {
			continue
		}
		mark := "REDACTED"
		if changed {
			mark = side.mark
		}
		side.o.Text = fmt.Sprintf("# %s a Secret that does not parse (%d bytes): not shown\n", mark, len(side.o.Text))
	}
}

// valueSize is a value's size in bytes: data's decoded from base64, as the Secret holds it.
func valueSize(field string, v any) int {
	s := fmt.Sprint(v)
	if field == "data" {
		if b, err := base64.StdEncoding.DecodeString(s); err == nil {
			return len(b)
		}
	}
	return len(s)
}

func secretOf(o *Object) (map[string]any, bool) {
	if o == nil {
		return nil, false
	}
	var m map[string]any
	if err := parseBounded(o.Text, MaxDocumentNodes, &m); err != nil {
		return nil, false
	}
	return m, true
}

func rewrite(o *Object, m map[string]any) {
	if o == nil {
		return
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		o.Text = "# a Secret that does not print: not shown\n"
		return
	}
	o.Text = string(b)
}
