"""The transactional outbox: writes that commit with the state change, and the relay."""
