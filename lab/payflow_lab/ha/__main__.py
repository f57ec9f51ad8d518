"""`python -m payflow_lab.ha [--hold]`: bring the HA lab up, print how long each part
took, and (with --hold) keep it running until Ctrl-C; always torn down at the end."""

from __future__ import annotations

import sys
import time

from payflow_lab.ha.topology import Lab, LabBusy, unavailable_reason


def main(argv: list[str]) -> int:
    """Run the lab once; 0 when it came up, 2 when it cannot run here."""
    reason = unavailable_reason()
    if reason is not None:
        print(f"ha lab: {reason}", file=sys.stderr)
        return 2
    lab = Lab(keep="--keep" in argv)
    try:
        lab.__enter__()
    except LabBusy as exc:
        print(f"ha lab: {exc}", file=sys.stderr)
        return 2
    try:
        print(" ".join(f"{name}={value:.1f}" for name, value in lab.timings.items()))
        print(f"api={lab.api_url} dsn={lab.env()['DATABASE_URL']}")
        print(f"brokers={lab.env()['RABBITMQ_URLS']} logs={lab.root}")
        if "--hold" in argv:
            try:
                while True:
                    time.sleep(1)
            except KeyboardInterrupt:
                pass
    finally:
        lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
