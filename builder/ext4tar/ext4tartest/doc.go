// Package ext4tartest makes, with the real mke2fs and sgdisk, the ext4
// images and GPT disks that the tests of the host-side reader
// (builder/ext4tar) and of the packer (builder/pack) read. Tests only.
package ext4tartest
