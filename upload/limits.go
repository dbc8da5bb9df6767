package upload

// maxSecretFile is the most read of a file that holds one secret (a site's
// api_key_file, a profile's token_file): a MAAS key or an admin token is
// under a kilobyte, and a larger file, a device or a FIFO is refused
// before it is read (readlimit.File).
const maxSecretFile = 64 << 10
