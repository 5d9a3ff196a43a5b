package helmexec

// LogOf is the debug log function opts give Helm (nil without WithLog): for fakes of Helm
// in tests of callers.
func LogOf(opts ...Option) func(string, ...any) {
	var o configOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.log
}
