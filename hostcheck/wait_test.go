package hostcheck_test

import "time"

// waitABit paces a poll for a file another process writes.
func waitABit() { time.Sleep(10 * time.Millisecond) }
