package recipes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/gpuaas/imagectl/internal/readlimit"
)

// tree decides which files a recipe may read. A path the recipe names by
// itself is resolved against the directory of the file that names it and,
// after symlinks are followed, must stay inside that directory's tree or
// under an extra root the caller allows (imagectl --root). This keeps a
// recipe from reaching into ~/.ssh or /etc of the build machine by accident,
// and keeps builds reproducible from a checkout. A path the user typed
// (userPath, see origin.go) is theirs: resolved against the working
// directory and not held to the tree.
type tree struct {
	extra []string
}

var errOutside = errors.New("outside the allowed directory tree")

// resolve returns the absolute, symlink-free path of p as named from a file
// in baseDir; userPath says the user typed it.
func (t tree) resolve(baseDir, p string, userPath bool) (string, error) {
	if strings.TrimSpace(p) == "" {
		return "", errors.New("the path is empty")
	}
	abs := located(baseDir, p, userPath)
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist", abs)
		}
		return "", err
	}
	if userPath {
		return real, nil
	}
	roots := append([]string{baseDir}, t.extra...)
	for _, root := range roots {
		rr, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if within(rr, real) {
			return real, nil
		}
	}
	return "", fmt.Errorf("%w: %s resolves to %s, which is outside %s", errOutside, p, real, baseDir)
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// sourceDiag turns a resolve error into a diagnostic about attribute what.
func sourceDiag(what string, rng *hcl.Range, err error) *hcl.Diagnostic {
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Subject: rng}
	switch {
	case errors.Is(err, errOutside):
		d.Summary = "Source outside the recipe's directory tree"
		d.Detail = fmt.Sprintf("The %s %s. Sources must live in the directory tree of the file that names them; pass --root DIR to allow another tree.", what, err.Error())
	default:
		d.Summary = fmt.Sprintf("Missing %s", what)
		d.Detail = fmt.Sprintf("Cannot use the %s: %s.", what, err.Error())
	}
	return d
}

// readSource resolves and reads a file named by a recipe, refusing one
// larger than limit bytes without reading past it: what a recipe reads
// lands in memory, the plan and the manifest (templates and keys are HCL
// input, hclkit.MaxInputSize; file sources and file() at most maxResultBytes).
func (t tree) readSource(baseDir, p string, userPath bool, limit int64) ([]byte, string, error) {
	real, err := t.resolve(baseDir, p, userPath)
	if err != nil {
		return nil, "", err
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, "", err
	}
	if st.IsDir() {
		return nil, "", fmt.Errorf("%s is a directory, not a file", p)
	}
	b, err := readlimit.File(real, limit)
	if errors.Is(err, readlimit.ErrTooLarge) {
		return nil, "", fmt.Errorf("%s is larger than %d MiB, the most a recipe reads into memory (large payloads belong in a bundle)", p, limit>>20)
	}
	return b, real, err
}
