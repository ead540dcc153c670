#!/usr/bin/env bash
# The backends side by side (make bench-backends): on this machine, one throwaway PostgreSQL
# cluster (fsync and synchronous_commit on, as in production), and the same `leasekeeper bench`
# (same clients, modes and duration) against
#
#   1. leasekeeper on SQLite,
#   2. leasekeeper on PostgreSQL, one replica,
#   3. leasekeeper on PostgreSQL, three replicas on one database (bench spreads its requests
#      over them, as a round-robin balancer would),
#
# then `pgbench -N` on the same cluster (one small write per commit: what the database does
# without leasekeeper), and one table of the ratios issue targets name: PostgreSQL / SQLite per
# mode, PostgreSQL p99 / SQLite p99, PostgreSQL renew / pgbench tps, three replicas / one; then
# the whole machine's CPU per operation in each run and mode (leasekeeper, PostgreSQL and the
# load generator, which share the cores), and from it the most each ratio can be on this machine
# (a run's rate with every core busy, over the other run's measured rate); last, where the cores
# went in each run.
#
# Environment: BIN (the leasekeeper binary, default bin/leasekeeper), PGBIN (PostgreSQL's
# programs, default the newest /usr/lib/postgresql/*/bin), CLIENTS (64), DURATION (in seconds: 8s),
# MODES (renew,cycle,fenced), POOL (--db-max-conns of each replica; default the server's),
# DBCORES (a list of CPUs for taskset, "0" say: PostgreSQL runs on them and everything else,
# SQLite's run too, on the other CPUs, as with a database on a machine of its own; by default
# all share every CPU). Go sets GOMAXPROCS to the CPUs a process may use: with one CPU left,
# GOMAXPROCS=2 keeps SQLite's writer batching (at 1 its commits hold the only P, and batches
# shrink to one operation or two; see BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(realpath "${BIN:-bin/leasekeeper}")
pgbin=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
clients=${CLIENTS:-64}
duration=${DURATION:-8s}
modes=${MODES:-renew,cycle,fenced}
pool=${POOL:+--db-max-conns $POOL}
dbcores=${DBCORES:-}
appcores=
app=()
if [[ -n $dbcores ]]; then
	# Both lists one CPU after another ("0-1" is "0,1"): the database's, and the others.
	read -r dbcores appcores < <(python3 -c 'import sys
db = set()
for part in sys.argv[2].split(","):
    lo, _, hi = part.partition("-")
    db.update(range(int(lo), int(hi or lo) + 1))
cpus = range(int(sys.argv[1]))
print(",".join(str(c) for c in cpus if c in db) or "-", ",".join(str(c) for c in cpus if c not in db) or "-")' "$(nproc)" "$dbcores")
	[[ $dbcores != - ]] || { echo "DBCORES=$DBCORES names no CPU of this machine" >&2; exit 1; }
	[[ $appcores != - ]] || { echo "DBCORES=$DBCORES leaves no CPU for leasekeeper" >&2; exit 1; }
	app=(taskset -c "$appcores")
fi
[[ -x $bin ]] || { echo "no leasekeeper binary at $bin (make build)" >&2; exit 1; }
[[ -x $pgbin/initdb ]] || { echo "no PostgreSQL programs (set PGBIN; Debian: apt-get install postgresql)" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leasekeeper-backends.XXXXXX")
chmod 755 "$tmp"
pids=()
# pgon CPUS PROGRAM ARGS…: runs one of PostgreSQL's programs on CPUS (all when empty). PostgreSQL
# refuses to run as root: as root, its programs run as the postgres user.
pgon() {
	local on=()
	[[ -n $1 ]] && on=(taskset -c "$1")
	if [[ $(id -u) == 0 ]]; then "${on[@]}" runuser -u postgres -- "$pgbin/$2" "${@:3}"; else "${on[@]}" "$pgbin/$2" "${@:3}"; fi
}
pg() { pgon "$dbcores" "$@"; }
# count LIST: how many CPUs a list of one CPU after another ("1,2,3") names; 0 for none.
count() { if [[ -z $1 ]]; then echo 0; else tr ',' '\n' <<<"$1" | wc -l; fi; }
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pg pg_ctl -D "$tmp/pg" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT
[[ $(id -u) == 0 ]] && chown postgres "$tmp"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

port=$(free_port)
pg initdb -D "$tmp/pg" -A trust -U postgres -E UTF8 >/dev/null
pg pg_ctl -D "$tmp/pg" -l "$tmp/pg.log" -w -o "-p $port -k $tmp -c listen_addresses= -c fsync=on -c synchronous_commit=on -c max_connections=200" start >/dev/null
pgurl() { echo "postgres://postgres@/$1?host=$tmp&port=$port"; }
for db in lk1 lk3 pgb; do pg createdb -h "$tmp" -p "$port" -U postgres "$db"; done

export LEASEKEEPER_ADMIN_KEY=lkk_bench-backends-0123456789abcdefghijklmnopqrstuvwxyz
# serve DB ARGS…: starts a server on a free port and sets url to its URL once it answers.
serve() {
	local p
	p=$(free_port)
	"${app[@]}" "$bin" serve --addr "127.0.0.1:$p" --db "$1" --log-level warn "${@:2}" >/dev/null 2>>"$tmp/serve.log" &
	pids+=($!)
	for _ in $(seq 100); do
		url=http://127.0.0.1:$p
		curl -fsS "$url/readyz" >/dev/null 2>&1 && return
		sleep 0.1
	done
	echo "the server on $1 did not start:" >&2
	cat "$tmp/serve.log" >&2
	exit 1
}
# ticks PID…: the CPU time, in clock ticks, the processes used, their reaped children's with it.
ticks() {
	local t=0 p
	for p in "$@"; do
		[[ -r /proc/$p/stat ]] && t=$((t + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$p/stat")))
	done
	echo "$t"
}
# pgpids: this cluster's postmaster and its live children (the backends of every connection).
pgpids() {
	local pm
	pm=$(head -1 "$tmp/pg/postmaster.pid")
	echo "$pm" $(ps -o pid= --ppid "$pm")
}
# bench NAME URLS: runs the load generator, one mode at a time, and keeps its output in
# $tmp/NAME; for each mode it writes to $tmp/NAME.cpu the CPU (seconds) that leasekeeper,
# PostgreSQL and the load generator used meanwhile, and the wall time, as "mode lk pg gen wall".
bench() {
	echo "== $1: leasekeeper bench -c $clients -d $duration --mode $modes" >&2
	local m hz
	hz=$(getconf CLK_TCK)
	: >"$tmp/$1.cpu"
	for m in ${modes//,/ }; do
		local lk0 pg0 began TIMEFORMAT='%U %S'
		lk0=$(ticks "${pids[@]}")
		# shellcheck disable=SC2046 # one word per pid
		pg0=$(ticks $(pgpids))
		began=$(date +%s.%N)
		{ time LEASEKEEPER_API_KEY=$LEASEKEEPER_ADMIN_KEY "${app[@]}" "$bin" bench --server "$2" -c "$clients" -d "$duration" --mode "$m" |
			tee -a "$tmp/$1" >&3; } 3>&2 2>"$tmp/$1.gen"
		local lk pgt
		lk=$(($(ticks "${pids[@]}") - lk0))
		# shellcheck disable=SC2046
		pgt=$(($(ticks $(pgpids)) - pg0))
		awk -v m="$m" -v wall="$(echo "$(date +%s.%N) - $began" | bc)" -v lk="$lk" -v pg="$pgt" -v hz="$hz" '
			END { split($0, g, " "); printf "%s %.2f %.2f %.2f %.2f\n", m, lk / hz, pg / hz, g[1] + g[2], wall }' \
			"$tmp/$1.gen" >>"$tmp/$1.cpu"
	done
	# With DBCORES, the shares are of the CPUs each side runs on: PostgreSQL's of its own, the
	# others' of the rest.
	awk -v run="$1" -v cores="$(nproc)" -v appn="$(count "$appcores")" -v dbn="$(count "$dbcores")" '
		{ lk += $2; pg += $3; gen += $4; wall += $5 }
		END {
			if (dbn == 0) {
				all = wall * cores
				printf "%s: CPU over %.1f s on %d cores: leasekeeper %.1f s (%.0f %%), PostgreSQL %.1f s (%.0f %%), load generator %.1f s (%.0f %%), idle or other %.0f %%\n",
					run, wall, cores, lk, 100 * lk / all, pg, 100 * pg / all, gen, 100 * gen / all, 100 - 100 * (lk + pg + gen) / all
			} else {
				printf "%s: CPU over %.1f s: PostgreSQL %.1f s (%.0f %% of its %d cores); on the other %d: leasekeeper %.1f s (%.0f %%), load generator %.1f s (%.0f %%), idle or other %.0f %%\n",
					run, wall, pg, 100 * pg / (wall * dbn), dbn, appn, lk, 100 * lk / (wall * appn), gen, 100 * gen / (wall * appn), 100 - 100 * (lk + gen) / (wall * appn)
			}
		}' \
		"$tmp/$1.cpu" | tee "$tmp/$1.cpu.sum" >&2
}
stop_servers() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
}

serve "$tmp/lk.db"
bench sqlite "$url"
stop_servers
# shellcheck disable=SC2086 # $pool is empty or two words
serve "$(pgurl lk1)" --secret-file "$tmp/secret" $pool
bench pg1 "$url"
stop_servers
urls=()
for _ in 1 2 3; do
	# shellcheck disable=SC2086
	serve "$(pgurl lk3)" --secret-file "$tmp/secret" $pool
	urls+=("$url")
done
bench pg3 "$(IFS=,; echo "${urls[*]}")"
stop_servers

echo "== pgbench -N -c $clients -T ${duration%s} on the same cluster" >&2
pg pgbench -h "$tmp" -p "$port" -U postgres -i -q -s 10 pgb >/dev/null 2>&1
pgon "$appcores" pgbench -h "$tmp" -p "$port" -U postgres -N -c "$clients" -j 2 -T "${duration%s}" pgb >"$tmp/pgbench" 2>&1
tps=$(awk '/^tps = / {print $3; exit}' "$tmp/pgbench")
echo "pgbench: $tps transactions/s" >&2

# The tables: ops/s ($3) and p99 ($6, "12.34ms") of each mode in each run, then the machine's
# CPU per operation in each (leasekeeper, PostgreSQL and the load generator together, from
# NAME.cpu: "mode lk pg gen wall"). No run can go faster than the cores over its CPU per
# operation: that rate over the other run's measured one bounds each ratio on this machine,
# whatever the write path's batching does with its waits (as long as the CPU per operation
# holds). The CPU per operation moves far less from run to run than the rates do.
awk -v modes="$modes" -v tps="$tps" -v clients="$clients" -v duration="$duration" -v cores="$(nproc)" -v split_cores="${dbcores:+1}" '
	FNR == 1 { run = FILENAME; sub(/.*\//, "", run); cpu = sub(/\.cpu$/, "", run) }
	!cpu && $2 == clients && $3 ~ /^[0-9.]+$/ { rate[run, $1] = $3; p = $6; sub(/ms$/, "", p); p99[run, $1] = p }
	cpu && NF == 5 && rate[run, $1] > 0 { per[run, $1] = 1e6 * ($2 + $3 + $4) / (rate[run, $1] * secs) }
	function ratio(a, b, f) { return b > 0 && a > 0 ? sprintf(f, a / b) : "-" }
	# most: the rate of a run whose CPU per operation is us with every core busy, over rate.
	function most(us, rate) { return us > 0 ? ratio(cores * 1e6 / us, rate, "%.2f") : "-" }
	BEGIN { secs = duration; sub(/s$/, "", secs) }
	END {
		n = split(modes, m, ",")
		printf "\n%d clients, %s per mode; PostgreSQL with fsync and synchronous_commit on\n\n", clients, duration
		printf "| mode | SQLite /s | PG 1 replica /s | PG 3 replicas /s | PG/SQLite | SQLite p99 ms | PG p99 ms | PG p99/SQLite p99 | 3 replicas/1 |\n"
		printf "|---|---|---|---|---|---|---|---|---|\n"
		for (i = 1; i <= n; i++) {
			k = m[i]
			s = rate["sqlite", k]; p = rate["pg1", k]; t = rate["pg3", k]
			ps = ratio(p, s, "%.2f"); pp = ratio(p99["pg1", k], p99["sqlite", k], "%.1f"); tp = ratio(t, p, "%.2f")
			printf "| %s | %.0f | %.0f | %.0f | %s | %s | %s | %s | %s |\n", k, s, p, t, ps, p99["sqlite", k], p99["pg1", k], pp, tp
		}
		pr = ratio(rate["pg1", "renew"], tps, "%.2f")
		printf "\npgbench -N: %.0f transactions/s; PostgreSQL renew / pgbench: %s\n", tps, pr
		printf "\nCPU of the whole machine per operation (leasekeeper, PostgreSQL and the load generator), µs,\n"
		if (split_cores) {
			printf "(the bounds are left out: PostgreSQL has cores of its own here, DBCORES):\n\n"
		} else {
			printf "and the most each ratio can be here: the rate of a run with every core busy (the cores over its CPU\n"
			printf "per operation) over the measured rate of the other run:\n\n"
		}
		printf "| mode | SQLite | PG 1 replica | PG 3 replicas | PG/SQLite at most | 3 replicas/1 at most |\n"
		printf "|---|---|---|---|---|---|\n"
		for (i = 1; i <= n; i++) {
			k = m[i]
			printf "| %s | %.0f | %.0f | %.0f | %s | %s |\n", k, per["sqlite", k], per["pg1", k], per["pg3", k],
				split_cores ? "-" : most(per["pg1", k], rate["sqlite", k]), split_cores ? "-" : most(per["pg3", k], rate["pg1", k])
		}
	}' "$tmp/sqlite" "$tmp/pg1" "$tmp/pg3" "$tmp/sqlite.cpu" "$tmp/pg1.cpu" "$tmp/pg3.cpu"
echo
cat "$tmp/sqlite.cpu.sum" "$tmp/pg1.cpu.sum" "$tmp/pg3.cpu.sum"
