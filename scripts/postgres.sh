#!/usr/bin/env bash
# postgres.sh starts (or stops) a local Postgres for trying Berth's cluster
# mode, from Debian's postgresql (make deps installs it):
#
#   scripts/postgres.sh [start]   make postgres
#   scripts/postgres.sh stop      make postgres-stop
#
# The cluster lives in ./.berth-postgres (BERTH_POSTGRES_DIR), owned by the
# postgres user when run as root (Postgres refuses to run as root), and
# listens on 127.0.0.1:5433 (BERTH_POSTGRES_PORT) only, with password
# authentication (scram-sha-256) for the role "berth", whose generated
# password is in .berth-postgres/password (mode 0600). Starting prints the
# DSN to give `berth serve --database`; a second start says it is already
# running and prints it again. The data stays across stops; remove the
# directory to start afresh.
set -euo pipefail

dir=$(realpath -m "${BERTH_POSTGRES_DIR:-./.berth-postgres}")
port=${BERTH_POSTGRES_PORT:-5433}
data=$dir/data
log() { printf 'postgres: %s\n' "$*" >&2; }

bin=
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -n); do
	[[ -x $d/pg_ctl ]] && bin=$d
done
if [[ -z $bin ]]; then
	log "Debian's postgresql is not installed (make deps, or apt-get install postgresql)"
	exit 1
fi

# as runs a command as the cluster's owner: the postgres user under root,
# else the caller.
as() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

running() { [[ -d $data ]] && as "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; }

dsn() { printf 'postgres://berth:%s@127.0.0.1:%s/berth?sslmode=disable\n' "$(cat "$dir/password")" "$port"; }

case "${1:-start}" in
stop)
	if running; then
		as "$bin/pg_ctl" -D "$data" -m fast -w stop >/dev/null
		log "stopped (data kept in $dir)"
	else
		log "not running"
	fi
	exit 0
	;;
start) ;;
*)
	log "usage: $0 [start|stop]"
	exit 2
	;;
esac

if running; then
	log "already running on 127.0.0.1:$port (data in $dir); use:"
	dsn
	exit 0
fi

if [[ ! -d $data ]]; then
	mkdir -p "$dir"
	chmod 0700 "$dir"
	if [[ $(id -u) == 0 ]]; then
		chown postgres:postgres "$dir"
		if ! runuser -u postgres -- test -w "$dir"; then
			log "the postgres user cannot reach $dir (a parent directory is closed to it); set BERTH_POSTGRES_DIR to a path it can reach"
			exit 1
		fi
	fi
	(umask 077 && head -c 30 /dev/urandom | base64 | tr -d '/+=\n' >"$dir/password")
	if [[ $(id -u) == 0 ]]; then chown postgres:postgres "$dir/password"; fi
	log "creating a cluster in $dir"
	as "$bin/initdb" -D "$data" -U berth --pwfile="$dir/password" --auth-local=scram-sha-256 \
		--auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
fi

as "$bin/pg_ctl" -D "$data" -l "$dir/postgres.log" -w -t 60 \
	-o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$dir'" start >/dev/null || {
	log "could not start; the end of $dir/postgres.log:"
	tail -n 20 "$dir/postgres.log" >&2 || true
	exit 1
}
if ! PGPASSWORD=$(cat "$dir/password") "$bin/psql" -h 127.0.0.1 -p "$port" -U berth -d postgres -tAc \
	"SELECT 1 FROM pg_database WHERE datname = 'berth'" | grep -q 1; then
	PGPASSWORD=$(cat "$dir/password") "$bin/createdb" -h 127.0.0.1 -p "$port" -U berth berth
fi
log "running on 127.0.0.1:$port (data in $dir; make postgres-stop stops it); use:"
dsn
