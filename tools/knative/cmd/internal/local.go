// Package internal holds what the local Knative processes (tools/knative/cmd/*) change in
// knative.dev/pkg's sharedmain set-up, in one place.
package internal

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"knative.dev/pkg/controller"
	"knative.dev/pkg/injection/sharedmain"
)

// Context is the context a local process hands to sharedmain.MainWithContext:
//
//   - no health-probe server: upstream binds it to a hard-coded :8080, and on one machine
//     every controller would race for that port;
//   - no Kubernetes Events: every generated reconciler (knative.dev/pkg's
//     genreconciler, createRecorder) and Eventing's own reconcilers take the recorder of the
//     context (controller.GetEventRecorder) and only build an event broadcaster, which posts
//     each Event to the API server, when there is none. Nothing here reads Events; they were
//     about a third of what Knative sent the API server during the tests (a create or a patch
//     per reconcile that fails or changes a finalizer). The recorder writes them to the log
//     instead, as the broadcaster also did.
func Context(ctx context.Context, component string) context.Context {
	ctx = sharedmain.WithHealthProbesDisabled(ctx)
	return controller.WithEventRecorder(ctx, logRecorder{log: newLogger(component)})
}

func newLogger(component string) *zap.SugaredLogger {
	l, err := zap.NewProduction()
	if err != nil {
		return zap.NewNop().Sugar()
	}
	return l.Named(component + ".events").Sugar()
}

// logRecorder is a record.EventRecorder that logs each Event and sends none.
type logRecorder struct{ log *zap.SugaredLogger }

var _ record.EventRecorder = logRecorder{}

func (r logRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.log.Infow(message, "type", eventtype, "reason", reason, "object", ref(obj))
}

func (r logRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.log.Infow(sprintf(format, args), "type", eventtype, "reason", reason, "object", ref(obj))
}

func (r logRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}

func ref(obj runtime.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", obj)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return kind
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}

func sprintf(format string, args []any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}
