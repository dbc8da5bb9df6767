package maas

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/canonical/gomaasclient/client"

	"github.com/gpuaas/imagectl/internal/readlimit"
)

// RackController is a rack controller (or region+rack host) as
// GET rackcontrollers/ returns it: the parts a check of what it serves
// needs.
type RackController struct {
	SystemID    string      `json:"system_id"`
	Hostname    string      `json:"hostname"`
	FQDN        string      `json:"fqdn"`
	IPAddresses []string    `json:"ip_addresses"`
	Interfaces  []Interface `json:"interface_set"`
	Services    []Service   `json:"service_set"`
	Version     string      `json:"version"`
}

// Interface is one of a controller's interfaces, with its addresses.
type Interface struct {
	Name  string `json:"name"`
	Links []Link `json:"links"`
}

// Link is an address of an interface on a subnet.
type Link struct {
	IPAddress string  `json:"ip_address"`
	Subnet    *Subnet `json:"subnet"`
}

// Subnet is the subnet of a link, with its VLAN.
type Subnet struct {
	CIDR string `json:"cidr"`
	VLAN VLAN   `json:"vlan"`
}

// VLAN is a VLAN as MAAS describes it: whether MAAS serves DHCP on it, and
// from which racks.
type VLAN struct {
	ID            int    `json:"id"`
	VID           int    `json:"vid"`
	FabricID      int    `json:"fabric_id"`
	DHCPOn        bool   `json:"dhcp_on"`
	PrimaryRack   string `json:"primary_rack"`
	SecondaryRack string `json:"secondary_rack"`
}

// Fabric is a fabric and its VLANs (GET fabrics/).
type Fabric struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	VLANs []VLAN `json:"vlans"`
}

// Service is one of a controller's services and its status ("running",
// "dead", "degraded", "off", "unknown").
type Service struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// RackImages is a 3.4 rack controller's own image list
// (op=list_boot_images): the status is for all its images together
// ("synced", "syncing", "out-of-sync", "region-importing", "unknown"),
// and "synced" compares names, not bytes. From 3.5 the call always says
// synced: do not use it there.
type RackImages struct {
	Connected bool        `json:"connected"`
	Status    string      `json:"status"`
	Images    []RackImage `json:"images"`
}

// RackImage is one image a 3.4 rack holds.
type RackImage struct {
	Name         string   `json:"name"`
	Architecture string   `json:"architecture"`
	Subarches    []string `json:"subarches,omitempty"`
}

// getJSON reads path (under api/2.0/) with the op and decodes it into out,
// with retries; the answer is bounded by maxAnswer.
func (c *Client) getJSON(ctx context.Context, doing, path, op string, out any) error {
	return c.call(ctx, doing, path, maxAnswer, func(a client.APIClient) error {
		return a.Get(op, url.Values{}, func(b []byte) error {
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("%s: MAAS's answer is not what it should be: %w", doing, err)
			}
			return nil
		})
	})
}

// Version returns the MAAS version (GET version/), such as "3.5.4".
func (c *Client) Version(ctx context.Context) (string, error) {
	var v struct {
		Version string `json:"version"`
	}
	if err := c.getJSON(ctx, "reading the MAAS version of "+c.cfg.URL, "version", "", &v); err != nil {
		return "", err
	}
	if v.Version == "" {
		return "", fmt.Errorf("reading the MAAS version of %s: the answer names none", c.cfg.URL)
	}
	return v.Version, nil
}

// RackControllers lists the rack controllers, region+rack hosts included.
func (c *Client) RackControllers(ctx context.Context) ([]RackController, error) {
	var out []RackController
	err := c.getJSON(ctx, "listing the rack controllers of "+c.cfg.URL, "rackcontrollers", "", &out)
	return out, err
}

// Fabrics lists the fabrics with their VLANs.
func (c *Client) Fabrics(ctx context.Context) ([]Fabric, error) {
	var out []Fabric
	err := c.getJSON(ctx, "listing the fabrics of "+c.cfg.URL, "fabrics", "", &out)
	return out, err
}

// RackBootImages returns a rack controller's own image list (MAAS 3.4).
func (c *Client) RackBootImages(ctx context.Context, systemID string) (*RackImages, error) {
	out := new(RackImages)
	err := c.getJSON(ctx, fmt.Sprintf("reading the boot images of rack controller %s on %s", systemID, c.cfg.URL),
		"rackcontrollers/"+url.PathEscape(systemID), "list_boot_images", out)
	return out, err
}

// ImportRackBootImages asks a rack controller to import the region's boot
// images now (MAAS 3.4: racks hold their own copies); it returns once
// MAAS accepted the request, not when the import ends.
func (c *Client) ImportRackBootImages(ctx context.Context, systemID string) error {
	doing := fmt.Sprintf("asking rack controller %s on %s to import boot images", systemID, c.cfg.URL)
	return c.call(ctx, doing, "rackcontrollers/"+url.PathEscape(systemID), maxAnswer, func(a client.APIClient) error {
		return a.Post("import_boot_images", url.Values{}, func([]byte) error { return nil })
	})
}

// AtLeast reports whether the MAAS version v (such as "3.5.4" or
// "3.6.0~beta1") is major.minor.patch or later; a version it cannot read
// is not.
func AtLeast(v string, major, minor, patch int) bool {
	v, _, _ = strings.Cut(v, "~")
	v, _, _ = strings.Cut(v, "-")
	parts := strings.SplitN(v, ".", 3)
	want := []int{major, minor, patch}
	for i, w := range want {
		n := 0
		if i < len(parts) {
			var err error
			if n, err = strconv.Atoi(parts[i]); err != nil {
				return false
			}
		} else if i == 0 {
			return false
		}
		if n != w {
			return n > w
		}
	}
	return true
}

// URL is the MAAS root the client talks to.
func (c *Client) URL() string { return c.cfg.URL }

// maxAnswer bounds each answer of the calls here (rack controllers,
// fabrics, a rack's images, the version): gomaasclient reads an answer
// whole before it is decoded.
const maxAnswer = 8 << 20

// limitTransport fails a response body's read past limit bytes.
type limitTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.limit, limit: t.limit, url: r.URL.Redacted()}
	return resp, nil
}

type limitedBody struct {
	io.ReadCloser
	left, limit int64
	url         string
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("the answer of %s is larger than %s: refusing it", b.url, readlimit.Size(b.limit))
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, fmt.Errorf("the answer of %s is larger than %s: refusing it", b.url, readlimit.Size(b.limit))
	}
	return n, err
}
