"""The platform API's one door to the Kubernetes API (`KubeClient`) and the Kubernetes
implementation of the org namespace seam."""
