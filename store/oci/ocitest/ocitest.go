// Package ocitest runs what tests of the OCI store need: the real CNCF
// distribution registry (Debian's docker-registry) on a loopback port, with
// TLS from a CA it makes and htpasswd authentication. Only tests import it.
package ocitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/gpuaas/imagectl/internal/testenv"
)

// Registry is a running registry.
type Registry struct {
	// Host is 127.0.0.1:PORT.
	Host string
	// CAFile is the PEM CA the registry's certificate chains to.
	CAFile             string
	Username, Password string
}

// Start runs a registry for the test, stopped when it ends.
func Start(t testing.TB) *Registry {
	t.Helper()
	bin := testenv.Tool(t, "docker-registry", "apt-get install docker-registry")
	dir := t.TempDir()
	r := &Registry{Username: "imagectl", Password: "s3cret-" + rand.Text()[:8], CAFile: filepath.Join(dir, "ca.pem")}
	certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	makeCerts(t, r.CAFile, certFile, keyFile)
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	write(t, htpasswd, r.Username+":"+string(hash)+"\n")

	client := &http.Client{Timeout: 2 * time.Second, Transport: r.Transport(t)}
	defer client.CloseIdleConnections()

	for attempt := 0; attempt < 3; attempt++ {
		r.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(testenv.FreePort(t)))
		config := filepath.Join(dir, "config.yml")
		write(t, config, fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
  secret: %s
  tls:
    certificate: %s
    key: %s
auth:
  htpasswd:
    realm: imagectl-test
    path: %s
`, filepath.Join(dir, "data"), r.Host, rand.Text(), certFile, keyFile, htpasswd))
		cmd := exec.Command(bin, "serve", config)
		logf, err := os.Create(filepath.Join(dir, "registry.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting docker-registry: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); logf.Close(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if resp, err := client.Get("https://" + r.Host + "/v2/"); err == nil {
				resp.Body.Close()
				t.Cleanup(stop)
				return r
			}
		}
		stop()
	}
	log, _ := os.ReadFile(filepath.Join(dir, "registry.log"))
	t.Fatalf("docker-registry did not answer on /v2/:\n%s", log)
	return nil
}

// Transport returns an HTTP transport that trusts the registry's CA, for
// clients a test builds itself.
func (r *Registry) Transport(t testing.TB) *http.Transport {
	t.Helper()
	pem, err := os.ReadFile(r.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
}

// DockerConfig writes dir/config.json with the registry's credentials and
// returns dir, for $DOCKER_CONFIG.
func (r *Registry) DockerConfig(t testing.TB, dir string) string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(r.Username + ":" + r.Password))
	b, err := json.Marshal(map[string]any{"auths": map[string]any{r.Host: map[string]string{"auth": auth}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "config.json"), string(b))
	return dir
}

// makeCerts writes a CA and a server certificate for 127.0.0.1 and
// localhost signed by it.
func makeCerts(t testing.TB, caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "imagectl test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	write(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	write(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
}

func write(t testing.TB, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}
