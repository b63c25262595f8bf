"""Several replicas and deployments: the shared session ``store/`` (memory, Redis, Sentinel,
Cluster), the ``placement`` policy that keeps a session on the deployment whose cache holds its
prefix, and ``affinity``, the LiteLLM router glue that applies it."""
