"""Quota tree and forest endpoints under ``/ws/v1/quotatrees`` and ``/ws/v1/forests`` (seed 003)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

__all__ = ["router"]


def router(service: Any) -> APIRouter:
    """The quota tree and forest routes bound to ``service``."""
    return APIRouter(tags=["forest"])
