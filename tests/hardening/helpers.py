"""What the hardening tests share: a one-leaf configuration everybody may submit to."""

from __future__ import annotations

#: Partition ``default`` with the leaf ``root.team``, open to every user.
TEAM_CONFIG = """
partitions:
  - name: default
    queues:
      - name: root
        submitacl: "*"
        queues:
          - name: team
"""
