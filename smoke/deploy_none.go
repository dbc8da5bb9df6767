//go:build !guestfs

package smoke

import (
	"context"
	"errors"
)

var errNoGuestfs = errors.New("this imagectl was built without libguestfs, which the smoke test deploys with: build it with make build (-tags guestfs)")

// Without the guestfs tag imagectl has no libguestfs to deploy with.
func canDeploy() error { return errNoGuestfs }

func deploy(context.Context, string, string, deployConfig) (*deployed, error) {
	return nil, errNoGuestfs
}
