"""The state gauges' refresher (`refresher.py`), above the domains whose tables it reads."""

from payflow.gauges.refresher import StateRefresher, queue_names, refreshing_state

__all__ = ["StateRefresher", "queue_names", "refreshing_state"]
