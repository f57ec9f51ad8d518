"""`python -m payflow` is the same as the `payflow` command."""

from payflow.cli import main

main()
