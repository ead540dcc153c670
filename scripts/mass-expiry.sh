#!/usr/bin/env bash
# mass-expiry.sh N: N leases that expire together, and how the server copes, measured from
# outside. It seeds N held leases straight into a fresh database, as scale-loaded.sh does
# (BACKEND=postgres: a throwaway PostgreSQL cluster, fsync on), then starts bin/leasekeeper:
# - on PostgreSQL the leases expired a second before the start, as after an outage of the
#   replicas longer than their ttl: the replica sweeps them once it is back;
# - on SQLite a restart stretches every lease still held by the last persisted time to a ttl
#   after the start (2 s here), so they all expire together 2 s after it.
# It prints the time to /readyz, how long after it the last expiry was recorded (the open
# grants counted in the database every 100 ms), and the time an acquire of a free name took
# meanwhile, every 100 ms (median and max): a sweep that held the writer or the start for all
# of its expiries shows there.
set -euo pipefail
n=${1:?usage: [BACKEND=postgres] mass-expiry.sh N}
bin=$(realpath "${BIN:-bin/leasekeeper}")
addr=${ADDR:-127.0.0.1:18092}
backend=${BACKEND:-sqlite}
dbname=mass pgport=5434
source "$(dirname "$0")/throwaway-db.sh"
open_jobs() { echo "SELECT count(*) FROM grants WHERE ended_at IS NULL AND name LIKE 'job-%';" | sql; }

$bin serve --addr "$addr" --db "$db" --log-level warn "${args[@]}" & pid=$!
until curl -sf "http://$addr/readyz" >/dev/null; do sleep 0.05; done
kill "$pid"; wait "$pid" || true # the schema and the admin key

if [[ $backend == postgres ]]; then
	seed_held "$n" 2000 "now - 3000" # expired a second ago
else
	seed_held "$n" 2000 "now - 1000" # expires in a second: the restart stretches it
fi
key=$(admin_key)

began=$(date +%s%3N)
$bin serve --addr "$addr" --db "$db" --log-level warn "${args[@]}" & pid=$!
until curl -sf "http://$addr/readyz" >/dev/null; do sleep 0.05; done
ready=$(date +%s%3N)
echo "$backend, $n leases expiring together: ready after $((ready - began)) ms, with $(open_jobs) of them still open"
i=0
while :; do
	i=$((i + 1))
	curl -s -o /dev/null -w '%{time_total}\n' -X POST -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
		-d '{"holder":"probe","ttl_ms":60000}' "http://$addr/v1/leases/probe-$i/acquire" >>"$dir/probes"
	if [[ $(open_jobs) == 0 ]]; then
		break
	fi
	if ((i >= 18000)); then # half an hour of probes
		echo "leases still open 30 min after ready: $(open_jobs)" >&2
		exit 1
	fi
	sleep 0.1
done
echo "last expiry recorded $(($(date +%s%3N) - ready)) ms after ready"
sort -n "$dir/probes" | awk '{a[NR] = $1} END {printf "acquire of a free name meanwhile: median %.1f ms, max %.1f ms (%d probes)\n", a[int((NR + 1) / 2)] * 1000, a[NR] * 1000, NR}'
