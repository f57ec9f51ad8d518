"""The `payflow` command groups, one module each; payflow.cli registers them."""

__all__: list[str] = []
