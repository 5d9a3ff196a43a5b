package ref

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

func TestURLInstallAnnotations(t *testing.T) {
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Annotations: map[string]string{"keep": "me"}}}
	URLInstall{ChartURL: "oci://r.example/tiny", Installation: InstallationURL, AuthSecret: "s"}.Annotate(ch)
	got := RecordedURLInstall(ch)
	if got.ChartURL != "oci://r.example/tiny" || got.Installation != InstallationURL || got.AuthSecret != "s" || ch.Metadata.Annotations["keep"] != "me" {
		t.Errorf("recorded %+v from %v", got, ch.Metadata.Annotations)
	}
	bare := &chart.Chart{}
	URLInstall{}.Annotate(bare)
	if bare.Metadata != nil {
		t.Errorf("an empty URLInstall wrote %+v", bare.Metadata)
	}
	URLInstall{AuthSecret: "s"}.Annotate(bare)
	if len(bare.Metadata.Annotations) != 1 || bare.Metadata.Annotations[AnnotationAuthSecret] != "s" {
		t.Errorf("annotations %v", bare.Metadata.Annotations)
	}
	if (RecordedURLInstall(nil) != URLInstall{}) || (RecordedURLInstall(&chart.Chart{}) != URLInstall{}) {
		t.Error("a chart without metadata records something")
	}
}
