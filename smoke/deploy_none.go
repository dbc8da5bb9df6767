//go:build !guestfs

package smoke

import (
	"context"
	"errors"
)

// Without the guestfs tag imagectl has no libguestfs to deploy with.
func deploy(context.Context, string, string, deployConfig) (*deployed, error) {
	return nil, errors.New("this imagectl was built without libguestfs, which the smoke test deploys with: build it with make build (-tags guestfs)")
}
