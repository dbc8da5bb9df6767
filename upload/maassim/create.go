package maassim

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpuaas/imagectl/internal/digest"
)

// filetypes maps a create filetype to the file's filetype and, from 3.5,
// its filename (before 3.5 the file is named after its filetype).
var filetypes = map[string][2]string{
	"tgz": {"root-tgz", "root.tgz"}, "tbz": {"root-tbz", "root.tbz"}, "txz": {"root-txz", "root.txz"},
	"ddtgz": {"root-dd", "root-dd.tar.gz"}, "ddtbz": {"root-dd.tar.bz2", "root-dd.tar.bz2"},
	"ddtxz": {"root-dd.tar.xz", "root-dd.tar.xz"}, "ddtar": {"root-dd.tar", "root-dd.tar"},
	"ddbz2": {"root-dd.bz2", "root-dd.bz2"}, "ddgz": {"root-dd.gz", "root-dd.gz"},
	"ddxz": {"root-dd.xz", "root-dd.xz"}, "ddraw": {"root-dd.raw", "root-dd.raw"},
}

// osNames are the operating systems MAAS has drivers for: an "os/series"
// name must start with one, and a bare OS name is reserved.
var osNames = []string{"centos", "custom", "esxi", "ol", "rhel", "suse", "ubuntu", "windows"}

var (
	reBaseImage = regexp.MustCompile(`^(ubuntu|centos|rhel|ol)/[a-z0-9][a-z0-9.]*$`)
	reHex64     = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

// create is BootResourcesHandler.create: validate the form, then make the
// resource (or a new set of an existing one) with an empty or inline file.
func (s *Server) create(w http.ResponseWriter, r *http.Request, body io.Reader) {
	var content []byte
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "multipart/form-data") {
		if err := r.ParseMultipartForm(s.opts.InlineLimit); err != nil {
			textError(w, http.StatusBadRequest, "Malformed multipart body: "+err.Error())
			return
		}
		// 3.8 dropped inline content.
		if fh := r.MultipartForm.File["content"]; len(fh) > 0 && !s.atLeast(3, 8) {
			f, err := fh[0].Open()
			if err == nil {
				content, err = io.ReadAll(f)
				f.Close()
			}
			if err != nil {
				textError(w, http.StatusBadRequest, "Reading content: "+err.Error())
				return
			}
		}
	} else if err := r.ParseForm(); err != nil {
		textError(w, http.StatusBadRequest, "Malformed form body: "+err.Error())
		return
	}
	form := r.Form
	if r.MultipartForm != nil {
		for k, v := range r.MultipartForm.Value {
			form[k] = v
		}
	}
	errs := map[string][]string{}
	add := func(field, msg string) { errs[field] = append(errs[field], msg) }

	name := form.Get("name")
	if name == "" {
		add("name", "This field is required.")
	}
	if !s.atLeast(3, 8) {
		name = strings.TrimPrefix(name, "custom/")
	}
	osName, _, hasOS := strings.Cut(strings.TrimPrefix(name, "custom/"), "/")
	switch {
	case name == "":
	case contains(syncedNames, name) || !hasOS && contains(osNames, name):
		add("name", fmt.Sprintf("%s is a reserved name.", name))
	case hasOS && !contains(osNames, osName):
		add("name", fmt.Sprintf("Unsupported operating system %s, supported operating systems: %s.", osName, strings.Join(osNames, ", ")))
	}
	arch := form.Get("architecture")
	switch {
	case arch == "":
		add("architecture", "This field is required.")
	case !contains(s.opts.Architectures, arch):
		quoted := make([]string, len(s.opts.Architectures))
		for i, a := range s.opts.Architectures {
			quoted[i] = "'" + a + "'"
		}
		add("architecture", fmt.Sprintf("'%s' is not a valid architecture. It should be one of: %s.", arch, strings.Join(quoted, ", ")))
	}
	filetype := form.Get("filetype")
	if filetype == "" {
		filetype = "tgz"
	}
	ft, ok := filetypes[filetype]
	if !ok {
		add("filetype", fmt.Sprintf("Select a valid choice. %s is not one of the available choices.", filetype))
	}
	custom := !hasOS || strings.HasPrefix(name, "custom/")
	baseImage := form.Get("base_image")
	if s.atLeast(3, 1) && custom && !reBaseImage.MatchString(baseImage) {
		add("base_image", "custom images require a valid base image name")
	}
	var sum string
	var size int64
	if content != nil {
		d := digest.Bytes(content)
		sum, size = d.Hex(), d.Size
	} else {
		sum = form.Get("sha256")
		switch {
		case sum == "":
			add("sha256", "This field is required.")
		case len(sum) < 64:
			add("sha256", fmt.Sprintf("Ensure this value has at least 64 characters (it has %d).", len(sum)))
		case len(sum) > 64:
			add("sha256", fmt.Sprintf("Ensure this value has at most 64 characters (it has %d).", len(sum)))
		case !reHex64.MatchString(sum):
			add("sha256", "Enter a valid sha256 hex digest.")
		}
		sz := form.Get("size")
		var err error
		switch size, err = strconv.ParseInt(sz, 10, 64); {
		case sz == "":
			add("size", "This field is required.")
		case err != nil:
			add("size", "Enter a whole number.")
		case size <= 0:
			add("size", "Ensure this value is greater than or equal to 1.")
		}
	}
	if len(errs) > 0 {
		validationError(w, errs)
		return
	}
	sum = strings.ToLower(sum)

	s.mu.Lock()
	defer s.mu.Unlock()
	// Files are stored by sha256: the same content is kept once.
	var same *rfile
	for _, res := range s.resources {
		for _, st := range res.sets {
			for _, f := range st.files {
				if f.sha256 != sum {
					continue
				}
				if f.size != size {
					textError(w, http.StatusBadRequest, "File already exists with sha256 that is of different size.")
					return
				}
				if f.verified {
					same = f
				}
			}
		}
	}
	var res *resource
	for _, cand := range s.resources {
		if cand.rtype == typeUploaded && cand.name == name && cand.arch == arch {
			res = cand
		}
	}
	if res == nil {
		s.nextID++
		res = &resource{id: s.nextID, rtype: typeUploaded, name: name, arch: arch}
		s.resources[res.id] = res
	}
	res.title = form.Get("title")
	res.baseImage = baseImage
	if form.Get("keep_old") == "" || form.Get("keep_old") == "false" {
		for _, st := range res.sets {
			st.files = nil
		}
	}
	s.nextFileID++
	f := &rfile{id: s.nextFileID, filetype: ft[0], filename: ft[0], sha256: sum, size: size, h: sha256.New()}
	if s.atLeast(3, 5) {
		f.filename = ft[1]
		f.onDisk = s.onDiskName(sum)
	}
	if same == nil {
		s.spool(f)
	}
	switch {
	case same != nil:
		f.received, f.verified = size, true
		f.content = same.content
	case content != nil:
		f.h.Write(content)
		f.received, f.verified = size, true
		if f.spooled != nil {
			_, _ = f.spooled.WriteAt(content, 0)
		}
		if s.atLeast(3, 5) && s.opts.CompleteAfterGets > 0 {
			f.lagGets = s.opts.CompleteAfterGets
		}
	}
	res.sets = append(res.sets, &rset{version: s.nextVersion(res), label: "uploaded", files: []*rfile{f}})
	writeJSON(w, http.StatusCreated, s.resourceDict(res, true))
}

// nextVersion is YYYYmmdd, then YYYYmmdd.1, .2, … for more sets that day.
func (s *Server) nextVersion(res *resource) string {
	day := s.opts.Now().Format("20060102")
	n := -1
	for _, st := range res.sets {
		v, suffix, _ := strings.Cut(st.version, ".")
		if v != day {
			continue
		}
		i, _ := strconv.Atoi(suffix)
		n = max(n, i)
	}
	if n < 0 {
		return day
	}
	return fmt.Sprintf("%s.%d", day, n+1)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
