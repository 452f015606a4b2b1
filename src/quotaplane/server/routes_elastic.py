"""Elastic quota endpoints under ``/ws/v1/partition/{p}/elasticquotas`` (seed 002)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

__all__ = ["router"]


def router(service: Any) -> APIRouter:
    """The elastic quota routes bound to ``service``."""
    return APIRouter(tags=["elastic"])
