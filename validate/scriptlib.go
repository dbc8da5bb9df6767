package validate

import (
	"embed"
	"fmt"
	"strings"
)

// The validation script's shell functions live in sh/*.sh, where shellcheck
// (make lint) and editors read them as shell. Each file opens with a comment
// for those readers (its shellcheck directives and what it holds), every
// line a "#" line, ended by a blank line; Script copies the rest into the
// script as it is, in the order of shLibs, after the header that sets the
// variables they read (PROFILE, STAGE, PROFILES, STAGES) and before the
// calls to the checks. POSIX sh: the script runs under dash; shellcheck
// reads every generated script in the tests.

//go:embed sh/*.sh
var shFiles embed.FS

var (
	shCore      = shLib("core.sh")      // parses the arguments and prints the result lines
	shImage     = shLib("image.sh")     // the checks of what the build put into the image
	shGPU       = shLib("gpu.sh")       // the GPUs, from nvidia-smi --query-gpu
	shSlice     = shLib("slice.sh")     // the slice profile's prerequisites
	shNetdata   = shLib("netdata.sh")   // Netdata's collectors' charts
	shConverged = shLib("converged.sh") // a profile's runtime baseline after the site bootstrap
	shTimeline  = shLib("timeline.sh")  // the first boot's timeline, for the result document
)

// shLibs are the shell functions in the order the script carries them.
var shLibs = []string{shCore, shImage, shGPU, shSlice, shNetdata, shConverged, shTimeline}

// shLib is the text of sh/name that goes into the script: what follows its
// opening comment. The files are compiled in, so a malformed one fails every
// test of the package.
func shLib(name string) string {
	b, err := shFiles.ReadFile("sh/" + name)
	if err != nil {
		panic(err)
	}
	head, body, ok := strings.Cut(string(b), "\n\n")
	for _, line := range strings.Split(head, "\n") {
		if !strings.HasPrefix(line, "#") {
			ok = false
		}
	}
	if !ok {
		panic(fmt.Sprintf("validate: sh/%s does not open with a comment ended by a blank line", name))
	}
	return body
}
