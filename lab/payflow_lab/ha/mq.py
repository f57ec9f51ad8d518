"""A three-node RabbitMQ cluster for the HA lab, one node per host (namespace).

Each node is a `rabbitmq-server` with its own RABBITMQ_NODENAME (`rabbit@pf-mqN`),
mnesia, logs and config, and one Erlang cookie shared through a private HOME; inside its
namespace it uses the default ports (5672, 25672, epmd 4369). The node names resolve
through each host's own `/etc/hosts` (`Network.write_hosts_file`). Nodes two and three
`join_cluster` the first. Quorum queues (payflow's default) replicate every message to
a majority of the three: losing one node loses no confirmed message.
"""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from payflow_lab.ha.netns import Host
from payflow_lab.ha.procs import LabError, port_check, run_in, run_once, stop, wait_for

RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")
EPMD = "/usr/bin/epmd"
AMQP_PORT = 5672
USER, PASSWORD = "payflow", "payflow-lab"


def missing_binaries() -> list[str]:
    """The Debian packages whose binaries this module needs and that are absent."""
    return [] if (RABBIT_BIN / "rabbitmq-server").exists() else ["rabbitmq-server"]


@dataclass
class RabbitCluster:
    """Three nodes: `start()` boots and clusters them, `close()` stops them."""

    root: Path
    hosts: tuple[Host, ...]
    cookie: str = field(default_factory=lambda: secrets.token_hex(16).upper())
    _servers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def node(self, host: Host) -> str:
        """The Erlang node name of `host`'s server."""
        return f"rabbit@{host.netns}"

    def url(self, host: Host) -> str:
        """The AMQP URL of one node (the lab's user, the default vhost)."""
        return f"amqp://{USER}:{PASSWORD}@{host.address}:{AMQP_PORT}/"

    def urls(self) -> tuple[str, ...]:
        """Every node's URL, in order: what RABBITMQ_URLS lists."""
        return tuple(self.url(host) for host in self.hosts)

    def _env(self, host: Host) -> dict[str, str]:
        base = self.root / host.name
        return {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(base),
            "LANG": "C.UTF-8",
            "RABBITMQ_NODENAME": self.node(host),
            "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(base / "log"),
            "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(base / "advanced.config"),
            # Not the machine's /etc/rabbitmq/rabbitmq-env.conf, which binds epmd and the
            # distribution port to 127.0.0.1 (the shared broker's set-up).
            "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
            "ERL_CRASH_DUMP": str(base / "erl_crash.dump"),
        }

    def start(self) -> None:
        """Boot every node at once, wait for each AMQP port, cluster two and three onto
        the first, then add the lab's user."""
        for host in self.hosts:
            base = self.root / host.name
            for sub in ("mnesia", "log"):
                (base / sub).mkdir(parents=True, exist_ok=True)
            (base / "enabled_plugins").write_text("[].\n")
            (base / "rabbitmq-env.conf").write_text("")
            # loopback_users = none: the lab's user connects from other hosts.
            (base / "rabbitmq.conf").write_text("loopback_users = none\n")
            cookie = base / ".erlang.cookie"
            cookie.write_text(self.cookie)
            cookie.chmod(0o400)
            self._boot(host)
        for host in self.hosts:
            wait_for(port_check(host.address, AMQP_PORT), f"RabbitMQ {host.name}")
        first = self.hosts[0]
        for host in self.hosts[1:]:
            self.ctl(host, "stop_app")
            self.ctl(host, "join_cluster", self.node(first))
            self.ctl(host, "start_app")
        self.ctl(first, "add_user", USER, PASSWORD)
        self.ctl(first, "set_user_tags", USER, "administrator")
        self.ctl(first, "set_permissions", "-p", "/", USER, ".*", ".*", ".*")
        for host in self.hosts:
            wait_for(port_check(host.address, AMQP_PORT), f"RabbitMQ {host.name}")

    def _boot(self, host: Host) -> None:
        log = self.root / f"{host.name}.log"
        # The node's own epmd in its namespace (the server does not start one there).
        run_once(host, [EPMD, "-daemon"], env=self._env(host), log=log, timeout_s=30)
        argv = [str(RABBIT_BIN / "rabbitmq-server")]
        self._servers[host.name] = run_in(host, argv, env=self._env(host), log=log)

    def restart(self, host: Host) -> None:
        """Boot `host`'s node again after a fault (it rejoins the cluster it belongs to)."""
        old = self._servers.pop(host.name, None)
        if old is not None:
            stop(old, grace_s=5)
        self._boot(host)
        wait_for(port_check(host.address, AMQP_PORT), f"RabbitMQ {host.name}", limit_s=120)

    def leader(self, queue: str, via: Host) -> Host | None:
        """The host whose node leads quorum queue `queue`, as `via`'s node sees it."""
        out = self.ctl(via, "list_queues", "-q", "--no-table-headers", "name", "leader")
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == queue:
                return next((h for h in self.hosts if self.node(h) == parts[1]), None)
        return None

    def ctl(self, host: Host, *args: str, timeout_s: float = 60.0) -> str:
        """`rabbitmqctl -n <host's node> *args`, run in `host`'s namespace."""
        argv = host.argv([str(RABBIT_BIN / "rabbitmqctl"), "-n", self.node(host), *args])
        done = subprocess.run(  # noqa: S603 - fixed binary, the lab's own arguments
            argv, env=self._env(host), capture_output=True, text=True, timeout=timeout_s
        )
        if done.returncode != 0:
            raise LabError(f"rabbitmqctl {args[0]} on {host.netns}: {done.stderr.strip()[-1500:]}")
        return done.stdout

    def running_nodes(self, via: Host) -> list[str]:
        """The cluster's running nodes, as `via`'s node sees them."""
        out = self.ctl(via, "eval", "rabbit_mnesia:cluster_nodes(running).")
        return sorted(part.strip(" []'\n") for part in out.split(",") if "@" in part)

    def close(self) -> None:
        """Stop every node (the namespaces' teardown kills whatever is left)."""
        for process in self._servers.values():
            stop(process, grace_s=15)
        self._servers.clear()
