# RDMA/InfiniBand tools and perftest.

description = "RDMA/IB tools and perf test utilities"

packages = [
  "rdma-core",
  "ibverbs-providers",
  "ibverbs-utils",
  "infiniband-diags",
  "rdmacm-utils",
  "perftest",
  "mstflint",
]

optional_packages = ["rshim"]
