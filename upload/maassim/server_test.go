package maassim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	gomaasapi "github.com/juju/gomaasapi/v2"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// These tests speak raw HTTP to the simulator, to check the rules a
// correct client never breaks; upload/maas's tests drive the rest through
// the real client.

type reply struct {
	status int
	ctype  string
	body   string
}

func sign(t *testing.T, req *http.Request, key string) {
	t.Helper()
	p := strings.Split(key, ":")
	s, _ := gomaasapi.NewPlainTestOAuthSigner(&gomaasapi.OAuthToken{ConsumerKey: p[0], TokenKey: p[1], TokenSecret: p[2]}, "MAAS API")
	if err := s.OAuthSign(req); err != nil {
		t.Fatal(err)
	}
}

func do(t *testing.T, sim *maassim.Server, key, method, path string, body io.Reader, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(method, sim.URL+"/api/2.0/"+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if key != "" {
		sign(t, req, key)
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}

func form(v url.Values) (io.Reader, http.Header) {
	return strings.NewReader(v.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
}

func createForm(name string, content []byte) url.Values {
	return url.Values{"name": {name}, "architecture": {"amd64/generic"}, "base_image": {"ubuntu/noble"},
		"sha256": {digest.Bytes(content).Hex()}, "size": {strconv.Itoa(len(content))}, "title": {"T"}}
}

type resource struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	BaseImage string `json:"base_image"`
	Sets      map[string]struct {
		Complete bool `json:"complete"`
		Files    map[string]struct {
			Complete       bool   `json:"complete"`
			UploadURI      string `json:"upload_uri"`
			FilenameOnDisk string `json:"filename_on_disk"`
		} `json:"files"`
	} `json:"sets"`
}

func create(t *testing.T, sim *maassim.Server, v url.Values) resource {
	t.Helper()
	b, h := form(v)
	r := do(t, sim, sim.AdminKey, "POST", "boot-resources/", b, h)
	if r.status != http.StatusCreated || !strings.HasPrefix(r.ctype, "application/json") {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var res resource
	if err := json.Unmarshal([]byte(r.body), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// uploadURI is the path (under api/2.0/) of the newest set's file.
func uploadURI(t *testing.T, res resource) string {
	t.Helper()
	for _, s := range res.Sets {
		for _, f := range s.Files {
			if f.UploadURI != "" {
				return strings.TrimPrefix(f.UploadURI, maassim.APIPrefix)
			}
		}
	}
	t.Fatalf("no upload_uri in %+v", res)
	return ""
}

func put(t *testing.T, sim *maassim.Server, path string, b []byte) reply {
	return do(t, sim, sim.AdminKey, "PUT", path, bytes.NewReader(b), http.Header{"Content-Type": {"application/octet-stream"}})
}

func TestOAuth(t *testing.T) {
	now := time.Now()
	sim := maassim.New(maassim.Options{Now: func() time.Time { return now }})
	defer sim.Close()
	if r := do(t, sim, "", "GET", "boot-resources/", nil, nil); r.status != 401 {
		t.Errorf("unsigned: %d %s", r.status, r.body)
	}
	p := strings.Split(sim.AdminKey, ":")
	if r := do(t, sim, p[0]+":"+p[1]+":wrong", "GET", "boot-resources/", nil, nil); r.status != 401 || !strings.Contains(r.body, "Invalid signature") {
		t.Errorf("bad secret: %d %s", r.status, r.body)
	}
	// The same signed request twice: the nonce is spent.
	req, _ := http.NewRequest("GET", sim.URL+"/api/2.0/boot-resources/", nil)
	sign(t, req, sim.AdminKey)
	if r := send(t, req.Clone(req.Context())); r.status != 200 {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	if r := send(t, req.Clone(req.Context())); r.status != 401 || !strings.Contains(r.body, "Nonce already used") {
		t.Errorf("replayed nonce: %d %s", r.status, r.body)
	}
	// A timestamp 301 s old is expired; 299 s is not.
	for _, tc := range []struct {
		skew time.Duration
		ok   bool
	}{{299 * time.Second, true}, {301 * time.Second, false}, {-301 * time.Second, false}} {
		now = time.Now().Add(tc.skew)
		r := do(t, sim, sim.AdminKey, "GET", "boot-resources/", nil, nil)
		if (r.status == 200) != tc.ok || !tc.ok && !strings.Contains(r.body, "Expired timestamp") {
			t.Errorf("skew %v: %d %s", tc.skew, r.status, r.body)
		}
	}
}

func TestAdminOnly(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	b, h := form(createForm("img", []byte("x")))
	if r := do(t, sim, sim.UserKey, "POST", "boot-resources/", b, h); r.status != 403 || r.body != "This method is reserved for admin users." {
		t.Errorf("user create: %d %q", r.status, r.body)
	}
	if r := do(t, sim, sim.UserKey, "GET", "boot-resources/", nil, nil); r.status != 200 {
		t.Errorf("user list: %d %s", r.status, r.body)
	}
	res := create(t, sim, createForm("img", []byte("x")))
	if r := do(t, sim, sim.UserKey, "DELETE", fmt.Sprintf("boot-resources/%d/", res.ID), nil, nil); r.status != 403 {
		t.Errorf("user delete: %d %s", r.status, r.body)
	}
	if r := do(t, sim, sim.UserKey, "PUT", uploadURI(t, res), strings.NewReader("x"), nil); r.status != 403 {
		t.Errorf("user upload: %d %s", r.status, r.body)
	}
}

func TestCreateValidation(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	good := createForm("img", []byte("abc"))
	for _, tc := range []struct {
		name  string
		edit  func(url.Values)
		field string
		want  string
	}{
		{"no name", func(v url.Values) { v.Del("name") }, "name", "This field is required."},
		{"no architecture", func(v url.Values) { v.Del("architecture") }, "architecture", "This field is required."},
		{"bad architecture", func(v url.Values) { v.Set("architecture", "amd64") }, "architecture", "'amd64' is not a valid architecture"},
		{"no base image", func(v url.Values) { v.Del("base_image") }, "base_image", "custom images require a valid base image name"},
		{"bad base image", func(v url.Values) { v.Set("base_image", "debian/bookworm") }, "base_image", "custom images require a valid base image name"},
		{"short sha256", func(v url.Values) { v.Set("sha256", "abc") }, "sha256", "at least 64 characters (it has 3)"},
		{"no size", func(v url.Values) { v.Del("size") }, "size", "This field is required."},
		{"bad size", func(v url.Values) { v.Set("size", "1e3") }, "size", "Enter a whole number."},
		{"bad filetype", func(v url.Values) { v.Set("filetype", "zip") }, "filetype", "Select a valid choice. zip is not one of the available choices."},
		{"reserved os name", func(v url.Values) { v.Set("name", "ubuntu") }, "name", "ubuntu is a reserved name."},
		{"reserved synced name", func(v url.Values) { v.Set("name", "ubuntu/noble") }, "name", "ubuntu/noble is a reserved name."},
		{"unknown os", func(v url.Values) { v.Set("name", "plan9/4e") }, "name", "Unsupported operating system plan9"},
	} {
		v := url.Values{}
		for k, vv := range good {
			v[k] = append([]string(nil), vv...)
		}
		tc.edit(v)
		b, h := form(v)
		r := do(t, sim, sim.AdminKey, "POST", "boot-resources/", b, h)
		var errs map[string][]string
		if r.status != 400 || json.Unmarshal([]byte(r.body), &errs) != nil || len(errs[tc.field]) == 0 || !strings.Contains(errs[tc.field][0], tc.want) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	// An os/series name of a known OS needs no base image.
	v := createForm("rhel/9-custom", []byte("abc"))
	v.Del("base_image")
	create(t, sim, v)
	// Same sha256, another size.
	v = createForm("other", []byte("abc"))
	v.Set("size", "4")
	b, h := form(v)
	if r := do(t, sim, sim.AdminKey, "POST", "boot-resources/", b, h); r.status != 400 || r.body != "File already exists with sha256 that is of different size." || !strings.HasPrefix(r.ctype, "text/plain") {
		t.Errorf("same sha256, other size: %d %q", r.status, r.body)
	}
	if r := do(t, sim, sim.AdminKey, "POST", "boot-resources/?op=frobnicate", nil, nil); r.status != 400 || r.body != "Unrecognised signature: method=POST op=frobnicate" {
		t.Errorf("unknown op: %d %q", r.status, r.body)
	}
}

func TestNamesAndSets(t *testing.T) {
	day := time.Now()
	d := day.Format("20060102")
	for _, v := range []string{"3.7", "3.8"} {
		sim := maassim.New(maassim.Options{Version: v})
		res := create(t, sim, createForm("custom/img", []byte("one")))
		want := map[string]string{"3.7": "img", "3.8": "custom/img"}[v]
		if res.Name != want || res.BaseImage != "ubuntu/noble" {
			t.Errorf("%s: name %q base %q", v, res.Name, res.BaseImage)
		}
		sim.Close()
	}
	sim := maassim.New(maassim.Options{Now: func() time.Time { return day }})
	defer sim.Close()
	var ids []int
	for i := 0; i < 12; i++ {
		ids = append(ids, create(t, sim, createForm("img", []byte{byte(i)})).ID)
	}
	rs := sim.Resources()
	r := rs[len(rs)-1]
	if ids[0] != ids[11] || len(r.Sets) != 12 || r.Sets[0].Version != d || r.Sets[1].Version != d+".1" || r.Sets[11].Version != d+".11" {
		t.Fatalf("sets %+v", r.Sets)
	}
	for i, s := range r.Sets[:11] {
		if len(s.Files) != 0 {
			t.Errorf("set %d kept its files", i)
		}
	}
	v := createForm("img", []byte("keep"))
	v.Set("keep_old", "true")
	create(t, sim, v)
	rs = sim.Resources()
	if r := rs[len(rs)-1]; len(r.Sets[11].Files) != 1 {
		t.Errorf("keep_old dropped the previous set's file")
	}
	// 2.9-3.4 name the file after its filetype, without filename_on_disk.
	old := maassim.New(maassim.Options{Version: "3.4"})
	defer old.Close()
	res := create(t, old, createForm("img", []byte("x")))
	for _, s := range res.Sets {
		for name, f := range s.Files {
			if name != "root-tgz" || f.FilenameOnDisk != "" || res.BaseImage != "" {
				t.Errorf("3.4 file %q %+v base %q", name, f, res.BaseImage)
			}
		}
	}
}

func TestChunkRules(t *testing.T) {
	sim := maassim.New(maassim.Options{CompleteAfterGets: 2})
	defer sim.Close()
	content := []byte("0123456789")
	res := create(t, sim, createForm("img", content))
	up := uploadURI(t, res)
	get := func() resource {
		r := do(t, sim, sim.AdminKey, "GET", fmt.Sprintf("boot-resources/%d/", res.ID), nil, nil)
		var out resource
		if r.status != 200 || json.Unmarshal([]byte(r.body), &out) != nil {
			t.Fatalf("get: %d %s", r.status, r.body)
		}
		return out
	}
	// No Content-Length: a chunked body.
	req, _ := http.NewRequest("PUT", sim.URL+"/api/2.0/"+up, io.MultiReader(strings.NewReader("01")))
	req.ContentLength = -1
	sign(t, req, sim.AdminKey)
	if r := send(t, req); r.status != 400 || r.body != "Missing data." {
		t.Errorf("chunked: %d %q", r.status, r.body)
	}
	if r := put(t, sim, "boot-resources/999/upload/1/", content); r.status != 404 {
		t.Errorf("missing resource: %d", r.status)
	}
	if r := put(t, sim, fmt.Sprintf("boot-resources/%d/upload/999/", res.ID), content); r.status != 404 {
		t.Errorf("missing file: %d", r.status)
	}
	if r := put(t, sim, up, []byte("0123")); r.status != 200 || r.body != "OK" {
		t.Fatalf("chunk: %d %q", r.status, r.body)
	}
	if r := put(t, sim, up, []byte("4567890")); r.status != 400 || r.body != "Too much data received." {
		t.Errorf("overflow: %d %q", r.status, r.body)
	}
	if r := put(t, sim, up, []byte("456789")); r.status != 200 {
		t.Fatalf("last chunk: %d %q", r.status, r.body)
	}
	// Verified, but complete shows only after the sync (two GETs here).
	for i, want := range []bool{false, false, true} {
		var complete, hasURI bool
		for _, s := range get().Sets {
			for _, f := range s.Files {
				complete, hasURI = f.Complete && s.Complete, f.UploadURI != ""
			}
		}
		if complete != want || hasURI == want {
			t.Errorf("GET %d: complete %v upload_uri %v", i, complete, hasURI)
		}
	}
	if r := put(t, sim, up, []byte("x")); r.status != 400 || r.body != "Cannot upload to a complete file." {
		t.Errorf("upload to complete: %d %q", r.status, r.body)
	}
	// A synced resource takes no upload.
	if r := put(t, sim, "boot-resources/1/upload/1/", []byte("x")); r.status != 403 || r.body != "Cannot upload to a resource of type: 0." {
		t.Errorf("synced: %d %q", r.status, r.body)
	}
	// A wrong last chunk leaves the file stuck.
	res2 := create(t, sim, createForm("img2", []byte("abcdef")))
	up2 := uploadURI(t, res2)
	if r := put(t, sim, up2, []byte("abcdeX")); r.status != 400 || r.body != "Saved content does not match given SHA256 value." {
		t.Errorf("mismatch: %d %q", r.status, r.body)
	}
	if r := put(t, sim, up2, []byte("abcdef")); r.status != 400 || r.body != "Too much data received." {
		t.Errorf("after mismatch: %d %q", r.status, r.body)
	}
	if r := do(t, sim, sim.AdminKey, "DELETE", fmt.Sprintf("boot-resources/%d/", res2.ID), nil, nil); r.status != 204 || r.body != "" {
		t.Errorf("delete: %d %q", r.status, r.body)
	}
	if r := do(t, sim, sim.AdminKey, "GET", fmt.Sprintf("boot-resources/%d/", res2.ID), nil, nil); r.status != 404 {
		t.Errorf("get deleted: %d", r.status)
	}
	if r := do(t, sim, sim.AdminKey, "DELETE", fmt.Sprintf("boot-resources/%d/", res2.ID), nil, nil); r.status != 404 {
		t.Errorf("delete deleted: %d", r.status)
	}
}

func TestListTypes(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	create(t, sim, createForm("img", []byte("x")))
	count := func(q string) int {
		r := do(t, sim, sim.AdminKey, "GET", "boot-resources/"+q, nil, nil)
		var list []map[string]any
		if r.status != 200 || json.Unmarshal([]byte(r.body), &list) != nil {
			t.Fatalf("list %s: %d %s", q, r.status, r.body)
		}
		for _, item := range list {
			if _, ok := item["sets"]; ok {
				t.Errorf("list item has sets: %v", item)
			}
		}
		return len(list)
	}
	if a, s, u, def := count("?type=all"), count("?type=synced"), count("?type=uploaded"), count(""); a != 3 || s != 2 || u != 1 || def != 3 {
		t.Errorf("all %d synced %d uploaded %d default %d", a, s, u, def)
	}
	// gomaasclient's filter arrives as "Type", which MAAS ignores.
	if n := count("?Type=uploaded"); n != 3 {
		t.Errorf("?Type= filtered: %d", n)
	}
	r := do(t, sim, sim.AdminKey, "GET", "boot-resources/?type=custom", nil, nil)
	if r.status != 400 || r.body != "'custom' is not a valid boot resource type. Available types: ['synced', 'uploaded']" {
		t.Errorf("bad type: %d %q", r.status, r.body)
	}
}

func TestInlineContent(t *testing.T) {
	multipartBody := func(size int) (io.Reader, http.Header, []byte) {
		content := bytes.Repeat([]byte("z"), size)
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for k, v := range map[string]string{"name": "inline", "architecture": "amd64/generic", "base_image": "ubuntu/noble"} {
			_ = mw.WriteField(k, v)
		}
		fw, _ := mw.CreateFormFile("content", "content")
		fw.Write(content)
		mw.Close()
		return &buf, http.Header{"Content-Type": {mw.FormDataContentType()}}, content
	}
	sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
	defer sim.Close()
	b, h, content := multipartBody(1 << 20)
	r := do(t, sim, sim.AdminKey, "POST", "boot-resources/", b, h)
	if r.status != 201 || !strings.Contains(r.body, digest.Bytes(content).Hex()) || !strings.Contains(r.body, `"complete":true`) {
		t.Errorf("small inline: %d %s", r.status, r.body)
	}
	b, h, _ = multipartBody(11 << 20)
	if r := do(t, sim, sim.AdminKey, "POST", "boot-resources/", b, h); r.status != 413 || !strings.Contains(r.body, "nginx") {
		t.Errorf("large inline: %d %s", r.status, r.body)
	}
	// 3.8 dropped inline content: sha256 and size are required.
	sim38 := maassim.New(maassim.Options{Version: "3.8"})
	defer sim38.Close()
	b, h, _ = multipartBody(100)
	if r := do(t, sim38, sim38.AdminKey, "POST", "boot-resources/", b, h); r.status != 400 || !strings.Contains(r.body, `"sha256"`) {
		t.Errorf("3.8 inline: %d %s", r.status, r.body)
	}
}

func TestFaultsAreCountedAndBounded(t *testing.T) {
	sim := maassim.New(maassim.Options{})
	defer sim.Close()
	sim.Inject(maassim.Fault{On: maassim.OpList, Kind: maassim.Unavailable, After: 1, Times: 2, RetryAfter: 7})
	var got []int
	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest("GET", sim.URL+"/api/2.0/boot-resources/", nil)
		sign(t, req, sim.AdminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got = append(got, resp.StatusCode)
		if resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "7" {
			t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
		}
	}
	if fmt.Sprint(got) != "[200 503 503 200 200]" || sim.Count(maassim.OpList) != 5 {
		t.Errorf("statuses %v, count %d", got, sim.Count(maassim.OpList))
	}
	// A dropped request gets no answer at all.
	sim.Inject(maassim.Fault{On: maassim.OpGet, Kind: maassim.Drop})
	req, _ := http.NewRequest("GET", sim.URL+"/api/2.0/boot-resources/1/", nil)
	sign(t, req, sim.AdminKey)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Errorf("dropped request answered %d", resp.StatusCode)
	}
}
