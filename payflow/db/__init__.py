"""Thin connector layer: pool creation, named queries and explicit transactions."""
