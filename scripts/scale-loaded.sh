#!/usr/bin/env bash
# scale-loaded.sh N: the server at N held leases, measured from outside while it is loaded.
# It seeds N held leases (ttl 1 h) straight into a fresh database (the sqlite3 CLI; with
# BACKEND=postgres, psql into a throwaway PostgreSQL cluster, fsync on, as make bench-backends
# makes, with shared_buffers of SHARED_BUFFERS, default 512MB: a million grants and their
# indexes take about 700 MB, and a deployment of that size gives the database memory), starts
# bin/leasekeeper on it (the time to /readyz is the restart), then runs `leasekeeper bench`
# (64 clients, 5 s each of acquire of new names and renew) while it fetches every overview view
# in a loop and samples the server's RSS; it prints the bench's figures, the views' medians
# under load, and the RSS (the peak while loaded, and after). WARM=S fetches a filter on a part
# first and waits S seconds before the load (the SQLite index of parts builds in the background
# from the server's start: the load then finds it built). VIEWS=0 leaves the views out: the
# write path alone, at N held leases.
set -euo pipefail
n=${1:?usage: [BACKEND=postgres] scale-loaded.sh N}
bin=$(realpath "${BIN:-bin/leasekeeper}")
addr=${ADDR:-127.0.0.1:18091}
backend=${BACKEND:-sqlite}
dbname=scale pgport=5433 pgopts="-c shared_buffers=${SHARED_BUFFERS:-512MB}"
source "$(dirname "$0")/throwaway-db.sh"

start() {
	local began=$(date +%s.%N)
	$bin serve --addr "$addr" --db "$db" --log-level warn --max-leases-per-key 0 "${args[@]}" & pid=$!
	until curl -sf "http://$addr/readyz" >/dev/null; do sleep 0.05; done
	echo "ready after $(echo "$(date +%s.%N) - $began" | bc) s"
}
stop() { kill "$pid"; wait "$pid" || true; }

start >/dev/null; stop # the schema and the admin key
seed_held "$n" 3600000 "now - (i * 7919) % 1500000"

start >"$dir/start"
echo "restart with $n held leases: $(cat "$dir/start")"
key=$(admin_key)
rss() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status"; }
( while kill -0 "$pid" 2>/dev/null; do rss; sleep 0.2; done ) >"$dir/rss" &
if [ "${WARM:-0}" != 0 ]; then
	curl -s -o /dev/null -H "Authorization: Bearer $key" -H 'Accept: text/html' "http://$addr/?q=needle"
	sleep "$WARM"
fi
views=("/" "/?sort=expiry" "/?sort=late" "/?sort=newest" "/?q=needle" "/?holder=needle" "/?state=expiring" "/?state=late" "/?prefix=job-000"
	"/?holder=worker-7&sort=newest" "/?q=job-&holder=-1")
if [ "${VIEWS:-1}" = 0 ]; then
	views=()
fi
( while [ ${#views[@]} -gt 0 ]; do for v in "${views[@]}"; do
	curl -s -o /dev/null -w "$v %{time_total}\n" -H "Authorization: Bearer $key" -H 'Accept: text/html' "http://$addr$v"
done; done ) >"$dir/views" & viewer=$!
LEASEKEEPER_API_KEY=$key $bin bench --server "http://$addr" -c 64 -d 5s --mode acquire,renew
kill $viewer 2>/dev/null || true
wait $viewer 2>/dev/null || true
echo "RSS: peak $(sort -n "$dir/rss" | tail -1) MB while loaded, $(rss) MB after"
[ ${#views[@]} -gt 0 ] || exit 0
echo "views under load (median s, samples):"
for v in "${views[@]}"; do
	awk -v v="$v" '$1 == v {print $2}' "$dir/views" | sort -n | awk -v v="$v" '{a[NR] = $1} END {printf "  %-20s %s (%d)\n", v, a[int((NR + 1) / 2)], NR}'
done
