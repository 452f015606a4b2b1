"""The state side of a partition: the one handler per event (:mod:`quotaplane.state.handlers`), the
questions the schedulers ask of it, its views and snapshot state, where a queue or user stands, and
the rules of nodes, gang placeholders and timeouts it applies."""
