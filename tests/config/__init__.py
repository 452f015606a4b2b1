"""Tests of quotaplane.config: loader, validation rules V-1 … V-21, files/CLI."""
