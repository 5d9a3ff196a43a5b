package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/gosuri/uitable"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"helm.sh/helm/v3/pkg/cli/output"
)

// The commands that mirror helm's print through Helm's own encoders, for scripts written for helm.

// outputValue is -o as helm's: another format is refused while the flags are parsed.
type outputValue struct{ p *string }

func (o outputValue) String() string { return *o.p }

// Type is what helm's help shows for -o.
func (o outputValue) Type() string { return "format" }

func (o outputValue) Set(s string) error {
	f, err := output.ParseFormat(s)
	if err != nil {
		return err
	}
	*o.p = f.String()
	return nil
}

// addOutputFlag binds -o/--output to p (its current value is the default).
func addOutputFlag(f *pflag.FlagSet, p *string) {
	f.VarP(outputValue{p}, "output", "o",
		"prints the output in the specified format. Allowed values: "+strings.Join(output.Formats(), ", "))
}

// writeFormat writes w as format (table, json or yaml), as helm's output.Format.Write.
func writeFormat(out io.Writer, format string, w output.Writer) error {
	f, err := output.ParseFormat(format)
	if err != nil {
		return err
	}
	return f.Write(out, w)
}

// table is a helm table whose cells have their controls escaped, so no row is forged.
type table struct{ *uitable.Table }

// newTable is a helm table with its header row (nil: none).
func newTable(header ...any) table {
	t := table{uitable.New()}
	if len(header) > 0 {
		t.AddRow(header...)
	}
	return t
}

func (t table) AddRow(cells ...any) {
	row := make([]any, len(cells))
	for i, c := range cells {
		row[i] = escapeText(fmt.Sprint(c))
	}
	t.Table.AddRow(row...)
}

// Helm's argument checks (cmd/helm/require), worded as helm words them.

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		var refused string
		switch {
		case len(args) >= lo && len(args) <= hi:
			return nil
		case hi == 0:
			refused = "accepts no arguments"
		case lo == hi:
			refused = fmt.Sprintf("requires %d %s", lo, plural("argument", lo))
		case len(args) < lo:
			refused = fmt.Sprintf("requires at least %d %s", lo, plural("argument", lo))
		default:
			refused = fmt.Sprintf("accepts at most %d %s", hi, plural("argument", hi))
		}
		return fmt.Errorf("%q %s\n\nUsage:  %s", cmd.CommandPath(), refused, cmd.UseLine())
	}
}

func plural(word string, n int) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
