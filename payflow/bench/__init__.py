"""Benchmarks: they print figures and ratios measured in one run; they are not tests."""
