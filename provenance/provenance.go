package provenance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gpuaas/imagectl/internal/digest"
	"github.com/gpuaas/imagectl/internal/redact"
)

const (
	// PredicateType is SLSA provenance v1's (cosign --type slsaprovenance1).
	PredicateType = "https://slsa.dev/provenance/v1"
	// BuildType names what the external parameters mean: an imagectl
	// recipe build.
	BuildType = "https://github.com/gpuaas/imagectl/buildtypes/recipe/v1"
	// BuilderID is the builder: imagectl, on the host recorded with it.
	BuilderID = "https://github.com/gpuaas/imagectl"
)

// Build is what a build tells its provenance.
type Build struct {
	// Subject is the tgz: its file name and sha256 (hex).
	Subject Resource
	// ImagectlVersion and Host are the builder; Accelerator (kvm, tcg)
	// and Packer (host, appliance) how it ran.
	ImagectlVersion, Host, Accelerator, Packer string
	// AptProxy is the proxy the guest's apt went through (the recipe's
	// apt_proxy), without credentials.
	AptProxy string
	// Recipe is the recipe file: its path as given (Name), its URI and
	// sha256. Version is the image version built and VersionFrom where it
	// came from.
	Recipe               Resource
	Version, VersionFrom string
	// Variables are the variables given (not defaults), sensitive ones
	// left out by the caller.
	Variables []Variable
	// SourceRevision is the git commit of the recipe's checkout.
	SourceRevision string
	// Base is the base image (URL, sha256); LayerFiles the layer files and
	// Bundles the bundles (source, tree digest).
	Base       Resource
	LayerFiles []Resource
	Bundles    []Resource
	// AptRepositories are the repositories the build installed from.
	AptRepositories []AptRepository
	// Packages are the package archives (.deb) the build fetched.
	Packages []Package
	// Byproducts are files made beside the tgz (the SBOM).
	Byproducts []Resource
	// InvocationID identifies this run; Started and Finished bound it.
	InvocationID      string
	Started, Finished time.Time
}

// Resource is an in-toto resource descriptor: a name, a URI, a sha256
// (hex, or "sha256:" and hex) and annotations, any of them empty.
type Resource struct {
	Name, URI, SHA256 string
	Annotations       map[string]string
}

// Package is a package archive a build fetched: the package's name,
// version and architecture, the URL it came from (without credentials) and
// its sha256 (hex) as the signed apt index gives it, when it gave one.
type Package struct {
	Name, Version, Architecture, URI, SHA256 string
}

// Variable is a recipe variable given to the build.
type Variable struct {
	Name string
	// Value is the variable's value as JSON.
	Value  json.RawMessage
	Source string
}

// AptRepository is an apt repository the build used: one a recipe layer
// added, or one the base image came configured with.
type AptRepository struct {
	Name, URI, Suite string
	Components       []string
	// KeySHA256 is the sha256 of its signing key, when the recipe gave one.
	KeySHA256 string
	// ConfiguredIn says where: "recipe layer <name>" or a file in the image.
	ConfiguredIn string
}

// Statement makes the in-toto statement (validated with the in-toto
// attestation library) as compact, deterministic JSON.
//
// The predicate's externalParameters are the recipe (path, digest), the
// version and where it came from, and the variables given (values and
// sources); internalParameters the host, accelerator, packer and apt
// proxy (credentials stripped). Its
// resolvedDependencies are the recipe (named by its path, annotated with
// the checkout's sourceRevision), the base image ("base"), the layer files
// (by path), the bundles ("bundle:<name>", digest the bundle's tree
// digest), the apt repositories ("apt:<name>") and the package archives
// fetched ("deb:<name>", annotated with version and architecture). Recipe and Base are
// left out when nothing of them is given (no URI nor digest); any other
// resource needs a URI or a digest.
func Statement(b Build) ([]byte, error) {
	if b.Subject.SHA256 == "" {
		return nil, fmt.Errorf("the provenance's subject %q has no sha256", b.Subject.Name)
	}
	if !b.Started.IsZero() && !b.Finished.IsZero() && b.Finished.Before(b.Started) {
		return nil, fmt.Errorf("the build finished (%s) before it started (%s)",
			b.Finished.UTC().Format(time.RFC3339Nano), b.Started.UTC().Format(time.RFC3339Nano))
	}
	subject, err := descriptor(b.Subject, "")
	if err != nil {
		return nil, fmt.Errorf("the provenance's subject: %w", err)
	}
	pred, err := predicate(b)
	if err != nil {
		return nil, fmt.Errorf("making the provenance of %s: %w", b.Subject.Name, err)
	}
	if err := pred.Validate(); err != nil {
		return nil, fmt.Errorf("the provenance of %s is not valid SLSA v1 provenance: %w", b.Subject.Name, err)
	}
	// The statement's predicate is a Struct: the provenance's JSON.
	pj, err := protojson.Marshal(pred)
	if err != nil {
		return nil, fmt.Errorf("encoding the provenance of %s: %w", b.Subject.Name, err)
	}
	var ps structpb.Struct
	if err := protojson.Unmarshal(pj, &ps); err != nil {
		return nil, fmt.Errorf("encoding the provenance of %s: %w", b.Subject.Name, err)
	}
	st := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []*intoto.ResourceDescriptor{subject},
		PredicateType: PredicateType,
		Predicate:     &ps,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("the provenance of %s is not a valid in-toto statement: %w", b.Subject.Name, err)
	}
	return marshal(st)
}

// marshal is protojson's encoding, compacted: protojson varies its
// whitespace from run to run on purpose, and orders map and Struct keys.
func marshal(m proto.Message) ([]byte, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding the statement: %w", err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, fmt.Errorf("encoding the statement: %w", err)
	}
	return out.Bytes(), nil
}

// predicate is the build's SLSA v1 provenance, not yet validated.
func predicate(b Build) (*slsa.Provenance, error) {
	ext := map[string]any{}
	recipe := map[string]any{}
	if b.Recipe.Name != "" {
		recipe["path"] = b.Recipe.Name
	}
	if b.Recipe.SHA256 != "" {
		d, err := sha256Hex(b.Recipe.SHA256)
		if err != nil {
			return nil, fmt.Errorf("recipe %s: %w", b.Recipe.Name, err)
		}
		recipe["digest"] = digest.Prefix + d
	}
	if len(recipe) > 0 {
		ext["recipe"] = recipe
	}
	putString(ext, "version", b.Version)
	putString(ext, "versionFrom", b.VersionFrom)
	vars, sources := map[string]any{}, map[string]any{}
	for _, v := range b.Variables {
		if v.Name == "" {
			return nil, errors.New("a variable has no name")
		}
		if _, dup := vars[v.Name]; dup {
			return nil, fmt.Errorf("variable %s is given twice", v.Name)
		}
		vars[v.Name] = nil
		if len(v.Value) > 0 {
			var val structpb.Value
			if err := protojson.Unmarshal(v.Value, &val); err != nil {
				return nil, fmt.Errorf("variable %s: its value is not JSON: %w", v.Name, err)
			}
			vars[v.Name] = val.AsInterface()
		}
		putString(sources, v.Name, v.Source)
	}
	if len(vars) > 0 {
		ext["variables"] = vars
	}
	if len(sources) > 0 {
		ext["variableSources"] = sources
	}
	extParams, err := structOf(ext)
	if err != nil {
		return nil, fmt.Errorf("encoding the external parameters: %w", err)
	}

	internal := map[string]any{}
	putString(internal, "host", b.Host)
	putString(internal, "accelerator", b.Accelerator)
	putString(internal, "packer", b.Packer)
	putString(internal, "aptProxy", redact.Userinfo(b.AptProxy))
	intParams, err := structOf(internal)
	if err != nil {
		return nil, fmt.Errorf("encoding the internal parameters: %w", err)
	}

	deps, err := dependencies(b)
	if err != nil {
		return nil, err
	}
	byproducts, err := descriptors(b.Byproducts)
	if err != nil {
		return nil, fmt.Errorf("byproduct: %w", err)
	}

	builder := &slsa.Builder{Id: BuilderID}
	if b.ImagectlVersion != "" {
		builder.Version = map[string]string{"imagectl": b.ImagectlVersion}
	}
	meta := &slsa.BuildMetadata{InvocationId: b.InvocationID}
	if !b.Started.IsZero() {
		meta.StartedOn = timestamppb.New(b.Started)
	}
	if !b.Finished.IsZero() {
		meta.FinishedOn = timestamppb.New(b.Finished)
	}
	if proto.Equal(meta, &slsa.BuildMetadata{}) {
		meta = nil
	}
	return &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            BuildType,
			ExternalParameters:   extParams,
			InternalParameters:   intParams,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{Builder: builder, Metadata: meta, Byproducts: byproducts},
	}, nil
}

// dependencies are the build's resolvedDependencies.
func dependencies(b Build) ([]*intoto.ResourceDescriptor, error) {
	var deps []*intoto.ResourceDescriptor
	if r := b.Recipe; r.Name != "" || r.URI != "" || r.SHA256 != "" || b.SourceRevision != "" {
		if b.SourceRevision != "" {
			r.Annotations = with(r.Annotations, "sourceRevision", b.SourceRevision)
		}
		name := r.Name
		if name == "" {
			name = "recipe"
		}
		d, err := descriptor(r, name)
		if err != nil {
			return nil, fmt.Errorf("recipe: %w", err)
		}
		deps = append(deps, d)
	}
	if b.Base.URI != "" || b.Base.SHA256 != "" {
		d, err := descriptor(b.Base, "base")
		if err != nil {
			return nil, fmt.Errorf("base image: %w", err)
		}
		deps = append(deps, d)
	}
	layers, err := descriptors(b.LayerFiles)
	if err != nil {
		return nil, fmt.Errorf("layer file: %w", err)
	}
	deps = append(deps, layers...)
	for _, r := range b.Bundles {
		r.Annotations = with(r.Annotations, "digestOf", "imagectl bundle tree")
		d, err := descriptor(r, "bundle:"+r.Name)
		if err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
		deps = append(deps, d)
	}
	for _, a := range b.AptRepositories {
		d, err := aptDescriptor(a)
		if err != nil {
			return nil, fmt.Errorf("apt repository: %w", err)
		}
		deps = append(deps, d)
	}
	for _, p := range b.Packages {
		ann := map[string]string{"version": p.Version}
		if p.Architecture != "" {
			ann["architecture"] = p.Architecture
		}
		d, err := descriptor(Resource{URI: p.URI, SHA256: p.SHA256, Annotations: ann}, "deb:"+p.Name)
		if err != nil {
			return nil, fmt.Errorf("package archive: %w", err)
		}
		deps = append(deps, d)
	}
	return deps, nil
}

func aptDescriptor(a AptRepository) (*intoto.ResourceDescriptor, error) {
	name := "apt:" + a.Name
	if a.URI == "" {
		return nil, fmt.Errorf("resource %s has no URI", name)
	}
	ann := map[string]any{}
	putString(ann, "suite", a.Suite)
	if len(a.Components) > 0 {
		cs := make([]any, len(a.Components))
		for i, c := range a.Components {
			cs[i] = c
		}
		ann["components"] = cs
	}
	putString(ann, "configuredIn", a.ConfiguredIn)
	if a.KeySHA256 != "" {
		k, err := sha256Hex(a.KeySHA256)
		if err != nil {
			return nil, fmt.Errorf("resource %s: its key's %w", name, err)
		}
		ann["keySha256"] = k
	}
	d := &intoto.ResourceDescriptor{Name: name, Uri: a.URI}
	if len(ann) > 0 {
		s, err := structpb.NewStruct(ann)
		if err != nil {
			return nil, fmt.Errorf("resource %s: encoding its annotations: %w", name, err)
		}
		d.Annotations = s
	}
	return d, d.Validate()
}

func descriptors(rs []Resource) ([]*intoto.ResourceDescriptor, error) {
	var out []*intoto.ResourceDescriptor
	for _, r := range rs {
		d, err := descriptor(r, "")
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// descriptor is r as a resource descriptor named name (r.Name when "").
// It needs a URI or a digest.
func descriptor(r Resource, name string) (*intoto.ResourceDescriptor, error) {
	if name == "" {
		name = r.Name
	}
	if r.URI == "" && r.SHA256 == "" {
		return nil, fmt.Errorf("resource %q has neither a URI nor a digest", name)
	}
	d := &intoto.ResourceDescriptor{Name: name, Uri: r.URI}
	if r.SHA256 != "" {
		h, err := sha256Hex(r.SHA256)
		if err != nil {
			return nil, fmt.Errorf("resource %q: %w", name, err)
		}
		d.Digest = map[string]string{"sha256": h}
	}
	if len(r.Annotations) > 0 {
		ann := make(map[string]any, len(r.Annotations))
		for k, v := range r.Annotations {
			ann[k] = v
		}
		s, err := structpb.NewStruct(ann)
		if err != nil {
			return nil, fmt.Errorf("resource %q: encoding its annotations: %w", name, err)
		}
		d.Annotations = s
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("resource %q: %w", name, err)
	}
	return d, nil
}

// sha256Hex is a sha256 given as hex or "sha256:" and hex, in either
// case, as lowercase hex.
func sha256Hex(s string) (string, error) {
	sum, err := digest.Parse(s)
	if err != nil {
		return "", err
	}
	return digest.Digest{Sum: sum}.Hex(), nil
}

// with is m (copied) with k set to v.
func with(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	out[k] = v
	return out
}

func putString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

// structOf is m as a Struct; nil for an empty m.
func structOf(m map[string]any) (*structpb.Struct, error) {
	if len(m) == 0 {
		return nil, nil
	}
	return structpb.NewStruct(m)
}
