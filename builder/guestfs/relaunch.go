package guestfs

import (
	"context"
	"fmt"
	"io"
)

// launchTries bounds how many times Open launches an appliance to get one
// whose kernel named the image's disk firstDrive.
const launchTries = 4

// firstDrive is libguestfs's name for the image's disk.
const firstDrive = "/dev/sda"

// untilFirstDrive launches with open until the appliance's kernel named
// the image's disk firstDrive, or the guest cannot tell (open's named is
// ""), at most launchTries times, and returns the session it keeps and how
// many launches that took. It closes each session it does not keep, and
// says in log why it launches again, and when it gives up and keeps one
// whose kernel named the disk otherwise (see Open).
func untilFirstDrive[S io.Closer](ctx context.Context, disk string, log func(string), open func() (s S, named string, err error)) (S, int, error) {
	var none S
	for try := 1; ; try++ {
		s, named, err := open()
		if err != nil {
			return none, try, err
		}
		switch {
		case named == firstDrive:
			return s, try, nil
		case named == "":
			log("could not tell which name the appliance's kernel gave the image's disk (no /dev/disk/by-id link or no readlink in the guest): " +
				"what tools in the guest write of the disk's name (grub.cfg's search hints) may differ from another build of the same inputs")
			return s, try, nil
		case try == launchTries:
			log(fmt.Sprintf("the appliance's kernel named the image's disk %s, not %s, in each of %d launches: going on; "+
				"what tools in the guest write of the disk's name (grub.cfg's search hints) may differ from another build of the same inputs",
				named, firstDrive, launchTries))
			return s, try, nil
		}
		log(fmt.Sprintf("the appliance's kernel named the image's disk %s, not %s (it probes disks in no fixed order): "+
			"launching it again, so that the guest's tools see the disk as every build does", named, firstDrive))
		if err := s.Close(); err != nil {
			return none, try, fmt.Errorf("closing the appliance on %s to launch it again: %w", disk, err)
		}
		if err := ctx.Err(); err != nil {
			return none, try, err
		}
	}
}
