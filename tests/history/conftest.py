"""The history tests use the e2e fixtures (a ``quotaplane serve`` subprocess) for the kill -9 test."""

from tests.e2e.conftest import config_file, pg_url, servers  # noqa: F401 - fixtures
