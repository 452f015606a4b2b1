"""Resource flavors (Kueue's ResourceFlavor and flavor fungibility, docs/flavors.md).

A flavor is a kind of node, told by its labels, that counts some resources apart (``nvidia.com/gpu`` on
A100 nodes and on H100 nodes). Quotas per flavor are plain quotas on flavored resource names
(:mod:`quotaplane.flavors.names`), so no engine knows about flavors; what is flavor-specific is which
flavor a request is charged to (:mod:`quotaplane.flavors.assign`, Kueue's flavor assigner with its
fungibility rules) and how nodes count per flavor (:mod:`quotaplane.flavors.catalog`).

This package imports only the base and the admission protocol's types; the partition's write path
plugs the choice in before admission (:mod:`quotaplane.partition.flavoring`).
"""
