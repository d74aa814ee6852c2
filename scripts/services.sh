#!/usr/bin/env bash
# Makes sure the servers the tests talk to are running: MariaDB on
# 127.0.0.1:3306 (root, empty password) and nats-server with JetStream on
# 127.0.0.1:4222. Installs MariaDB on a Debian machine that lacks it, and
# spin, which `make verify` needs.
set -euo pipefail

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
	for _ in $(seq 1 60); do listening "$1" && return 0; sleep 0.5; done
	echo "services: nothing listens on 127.0.0.1:$1 after 30s" >&2
	return 1
}

# What a fresh machine lacks, from Debian's packages, in one apt run:
# spin (make verify), the Debian nats-server (2.9: the tests that run a
# nats-server process, and the old-release rails), MariaDB, and iptables
# for the fault harness's partitions (iproute2 gives ip netns and tc).
missing=()
command -v spin >/dev/null 2>&1 || missing+=(spin gcc)
[ -x /usr/sbin/nats-server ] || missing+=(nats-server)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
	echo "services: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	# The package's own unit is not what the tests use: they start their own.
	if command -v systemctl >/dev/null 2>&1; then systemctl stop nats-server 2>/dev/null || true; fi
fi

if ! listening 3306; then
	echo "services: starting MariaDB"
	mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
	if [ ! -d /var/lib/mysql/mysql ]; then
		mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
	fi
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
	wait_port 3306
	# A fresh install authenticates root by socket; the tests use TCP with an empty password.
	mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); CREATE DATABASE IF NOT EXISTS test;" 2>/dev/null || true
fi

if ! listening 4222; then
	if [ -x /usr/sbin/nats-server ]; then
		echo "services: starting nats-server"
		mkdir -p /var/lib/nats-server
		start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
		wait_port 4222
	else
		# The tests embed their own nats-server; the machine's is only a convenience.
		echo "services: no nats-server binary; tests use embedded servers"
	fi
fi
echo "services: MariaDB and NATS ready"
