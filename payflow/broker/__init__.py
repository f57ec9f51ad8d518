"""RabbitMQ: topology, publishing with confirms, consuming with retry tiers and a DLQ."""
