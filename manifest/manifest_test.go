package manifest

import (
	"encoding/json"
	"testing"
)

// TestCheckJSON: the plan's JSON had "Name" and "Command" keys where
// every other key is snake_case.
func TestCheckJSON(t *testing.T) {
	b, err := json.Marshal(Check{Name: "n", Command: "c"})
	if err != nil || string(b) != `{"name":"n","command":"c"}` {
		t.Errorf("%s %v", b, err)
	}
	var back Check
	if err := json.Unmarshal([]byte(`{"Name":"n","Command":"c"}`), &back); err != nil || back != (Check{"n", "c"}) {
		t.Errorf("the old keys no longer decode: %+v %v", back, err)
	}
}
