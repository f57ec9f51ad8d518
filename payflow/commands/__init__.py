"""The `payflow` command groups, one module each; payflow.cli registers them."""
