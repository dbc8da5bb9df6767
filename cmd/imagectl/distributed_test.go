package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/imagectl/release"
	"github.com/gpuaas/imagectl/signing/signingtest"
	"github.com/gpuaas/imagectl/store/gitcatalog/gittest"
	"github.com/gpuaas/imagectl/store/oci/ocitest"
	"github.com/gpuaas/imagectl/store/storetest"
	"github.com/gpuaas/imagectl/upload/maassim"
)

// machine is one machine's environment: its own HOME and cache, so nothing
// one "machine" keeps locally is seen by another; what they share goes
// through the registry and the git catalog.
func machine(t *testing.T, shared ...string) []string {
	home := t.TempDir()
	return append([]string{"HOME=" + home, "IMAGECTL_CACHE_DIR=" + filepath.Join(home, ".cache", "imagectl")}, shared...)
}

// groupSites writes a sites file of a simulated MAAS site per name, each
// site's API key in $NAME<keySuffix> (keyEnv sets them, in the names'
// order), and the group "all" of them.
func groupSites(t *testing.T, keySuffix string, names ...string) (sims map[string]*maassim.Server, sites string, keyEnv []string) {
	t.Helper()
	sims = map[string]*maassim.Server{}
	var src strings.Builder
	for _, n := range names {
		sim := maassim.New(maassim.Options{CompleteAfterGets: -1})
		t.Cleanup(sim.Close)
		sims[n] = sim
		fmt.Fprintf(&src, "site %q {\n  maas_url    = %q\n  api_key_env = %q\n}\n\n", n, sim.URL, strings.ToUpper(n)+keySuffix)
		keyEnv = append(keyEnv, strings.ToUpper(n)+keySuffix+"="+sim.AdminKey)
	}
	fmt.Fprintf(&src, "group \"all\" {\n  sites = [\"%s\"]\n}\n", strings.Join(names, `", "`))
	sites = filepath.Join(t.TempDir(), "sites.hcl")
	if err := os.WriteFile(sites, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return sims, sites, keyEnv
}

// TestRegistryGitAndSites is the flow of docs/stores.md's "Beyond one machine": CI
// publishes signed versions into a registry; a release engineer on another
// machine promotes them to three MAAS sites through the git catalog and
// rolls one site back; an operator on a third machine sees the same state,
// the channel tags agree with the catalog, and the real cosign verifies
// the registry reference.
func TestRegistryGitAndSites(t *testing.T) {
	reg := ocitest.Start(t)
	catalog, gitCreds := httpCatalog(t)

	keys := t.TempDir()
	signer, pub := storetest.Keys(t, keys)
	dockerConfig := reg.DockerConfig(t, t.TempDir())
	storeRef := "oci://" + reg.Host + "/imagectl/ci"
	common := []string{"DOCKER_CONFIG=" + dockerConfig, "IMAGECTL_REGISTRY_CA=" + reg.CAFile, "IMAGECTL_STORE=" + storeRef}

	// CI publishes two versions, signed.
	ci := machine(t, append(common, "COSIGN_PASSWORD=pw")...)
	for _, v := range []string{"1.0.0", "1.1.0"} {
		tgz, _ := storetest.Artifact(t, t.TempDir(), "demo", v, storetest.Options{Signer: signer, Documents: true})
		out, errs, code := imagectl(t, ci, "publish", tgz, "--sign-key", filepath.Join(keys, "cosign.key"))
		if code != 0 || !strings.Contains(out, "published demo "+v+": "+reg.Host+"/imagectl/ci/demo:"+v) || !strings.Contains(out, "signed: yes") {
			t.Fatalf("publish %s: exit %d\n%s%s", v, code, out, errs)
		}
	}
	out, errs, code := imagectl(t, ci, "images")
	if code != 0 || !strings.Contains(out, "demo   1.0.0") || !strings.Contains(out, "demo   1.1.0") {
		t.Fatalf("images: exit %d\n%s%s", code, out, errs)
	}

	// Three sites, and a group of them.
	sims, sites, keyEnv := groupSites(t, "_MAAS_KEY", "east", "west", "north")
	shared := append(append(append(common, keyEnv...), gitCreds...), "IMAGECTL_SITES="+sites, "IMAGECTL_CATALOG="+catalog)

	// The release engineer promotes from another machine.
	rel := machine(t, shared...)
	out, errs, code = imagectl(t, rel, "promote", "demo", "1.0.0", "--site", "east", "--site", "west", "--site", "north",
		"--key", pub, "--by", "Rita <rita@example.com>", "--reason", "first rollout")
	if code != 0 {
		t.Fatalf("promote 1.0.0: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = imagectl(t, rel, "promote", "demo", "1.1.0", "--site", "all", "--canary", "east", "--parallel", "2",
		"--key", pub, "--by", "Rita <rita@example.com>", "--reason", "new driver")
	if code != 0 {
		t.Fatalf("promote 1.1.0 to the group: exit %d\n%s%s", code, out, errs)
	}
	// The same command again has nothing left to do.
	out, errs, code = imagectl(t, rel, "promote", "demo", "1.1.0", "--site", "all", "--key", pub, "--by", "rita")
	if code != 0 || strings.Contains(out, "failed") {
		t.Fatalf("promote again: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = imagectl(t, rel, "rollback", "demo", "--site", "west", "--key", pub, "--by", "rita", "--reason", "NCCL hangs")
	if code != 0 || !strings.Contains(out, "back from 1.1.0 to 1.0.0") {
		t.Fatalf("rollback: exit %d\n%s%s", code, out, errs)
	}
	for s, sim := range sims {
		if n := sim.Count(maassim.OpCreate); n != 2 {
			t.Errorf("site %s: %d boot resources created, want 2 (one per version, none again)", s, n)
		}
	}

	// An operator on a third machine sees the same state, and the
	// registry's channel tags agree with the catalog.
	op := machine(t, shared...)
	want := map[string]string{"east": "1.1.0", "west": "1.0.0", "north": "1.1.0"}
	for s, v := range want {
		out, errs, code := imagectl(t, op, "status", "--site", s, "-o", "json")
		var st release.SiteStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.Drift {
			t.Fatalf("status %s: exit %d %v\n%s%s", s, code, err, out, errs)
		}
		if len(st.Images) != 1 || st.Images[0].Promoted != v {
			t.Errorf("status %s: %+v, want demo %s", s, st.Images, v)
		}
	}
	out, _, code = imagectl(t, op, "history", "demo", "--site", "west")
	if code != 0 || !strings.Contains(out, "1.0.0 (rollback)") || !strings.Contains(out, "NCCL hangs") {
		t.Errorf("history west: exit %d\n%s", code, out)
	}
	out, errs, code = imagectl(t, op, "diff", "demo", "1.0.0", "1.1.0")
	if code != 1 || !strings.Contains(out, "1.0.0") {
		t.Errorf("diff from the registry: exit %d\n%s%s", code, out, errs)
	}
	// check reads the tgz as a file: fetched into this machine's cache,
	// verified. (The test tgz is no bootable root: the check finds errors.)
	out, errs, code = imagectl(t, op, "check", "demo", "1.1.0")
	if code != 1 || !strings.Contains(out, "error: ") {
		t.Errorf("check from the registry: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := imagectl(t, op, "check", "demo", "9.9.9"); code == 0 || !strings.Contains(errs, "not in the store") {
		t.Errorf("check of a version not in the registry: exit %d\n%s", code, errs)
	}

	// The SBOMs of the two versions, from the registry: the same packages.
	if out, errs, code := imagectl(t, op, "diff", "demo", "1.0.0", "1.1.0", "--sbom"); code != 0 {
		t.Errorf("diff --sbom: exit %d, want 0\n%s%s", code, out, errs)
	}

	// The real cosign verifies the registry reference with the key, and its
	// provenance attestation, and refuses both with another.
	cosign := signingtest.Cosign(t)
	verify := func(key string, args ...string) ([]byte, error) {
		args = append(args, "--key", key, "--insecure-ignore-tlog=true", reg.Host+"/imagectl/ci/demo:1.1.0")
		cmd := exec.Command(cosign, args...)
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+dockerConfig, "SSL_CERT_FILE="+reg.CAFile, "HOME="+t.TempDir())
		return cmd.CombinedOutput()
	}
	_, other := storetest.Keys(t, t.TempDir())
	for _, args := range [][]string{{"verify"}, {"verify-attestation", "--type", "slsaprovenance1"}} {
		if b, err := verify(pub, args...); err != nil {
			t.Errorf("cosign %s: %v\n%s", args[0], err, b)
		}
		if b, err := verify(other, args...); err == nil {
			t.Errorf("cosign %s with another key passed:\n%s", args[0], b)
		}
	}
}

// httpCatalog serves an empty git catalog over http with credentials, as
// users keep theirs: a git credential helper's. It returns the remote and
// the environment that gives git the credentials (without a HOME of its
// own, which each machine has).
func httpCatalog(t *testing.T) (remote string, gitCreds []string) {
	t.Helper()
	remote = gittest.HTTP(t, filepath.Dir(gittest.Bare(t)), "rita", "s3cret") + "catalog.git"
	for _, kv := range gittest.Credentials(t, remote, "rita", "s3cret") {
		if !strings.HasPrefix(kv, "HOME=") {
			gitCreds = append(gitCreds, kv)
		}
	}
	return remote, gitCreds
}
