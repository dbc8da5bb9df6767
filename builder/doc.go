// Package builder owns what a build does: the plan (the ordered, digested
// layers of steps a recipe resolves to, with the artifacts and the MAAS
// target it produces), its text and JSON renderings for --dry-run, and, as
// the builder grows, the executors that apply the same plan to an image.
package builder
