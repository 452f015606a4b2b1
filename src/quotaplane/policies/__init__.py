"""Quota policies: the engines behind the admission protocol of ``quotaplane.policy``."""
