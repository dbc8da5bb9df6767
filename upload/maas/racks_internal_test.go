package maas

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A MAAS whose rack controller list is larger than maxAnswer is refused
// rather than read whole.
func TestRackControllersAnswerIsBounded(t *testing.T) {
	const entry = `{"hostname":"r"},`
	big := "[" + strings.Repeat(entry, maxAnswer/len(entry)+1) + `{"hostname":"r"}]`
	small := `[{"hostname":"r"}]`
	answer := big
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(answer))
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL + "/MAAS", APIKey: "a:b:c", Retries: 1, Backoff: func(int) time.Duration { return time.Millisecond }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RackControllers(context.Background()); err == nil || !strings.Contains(err.Error(), "is larger than 8 MiB") {
		t.Fatalf("want the answer refused, got %v", err)
	}
	answer = small
	if rcs, err := c.RackControllers(context.Background()); err != nil || len(rcs) != 1 {
		t.Fatalf("small answer: %v %+v", err, rcs)
	}
}
