"""Benchmarks behind `payflow bench ...`: they print figures, they never assert."""
