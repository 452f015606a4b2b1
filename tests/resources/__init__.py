"""Tests of quotaplane.resources: R-1 … R-9, Q-1 … Q-6, K8-1/K8-2."""
