"""Development harness: the local Kubernetes control plane used by the tests and `make up`."""
