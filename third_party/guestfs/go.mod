module libguestfs.org/guestfs

go 1.21
