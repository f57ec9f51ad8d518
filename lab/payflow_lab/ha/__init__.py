"""The HA lab (dev tooling): payflow over hosts made of network namespaces, with
PostgreSQL under pg_auto_failover, a three-node RabbitMQ cluster and HAProxy
(docs/deployment.md). `python -m payflow_lab.ha` brings it up and prints the timings."""
