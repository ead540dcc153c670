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
dir=$(mktemp -d)
chmod 755 "$dir"
pgbin=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
# PostgreSQL refuses to run as root: as root, its programs run as the postgres user.
pg() {
	if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$pgbin/$1" "${@:2}"; else "$pgbin/$1" "${@:2}"; fi
}
cleanup() {
	kill "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	[[ $backend == postgres ]] && pg pg_ctl -D "$dir/pg" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$dir"
}
pid=
trap cleanup EXIT
db=$dir/scale.db
args=()
if [[ $backend == postgres ]]; then
	[[ -x $pgbin/initdb ]] || { echo "no PostgreSQL programs (set PGBIN)" >&2; exit 1; }
	[[ $(id -u) == 0 ]] && chown postgres "$dir"
	pg initdb -D "$dir/pg" -A trust -U postgres -E UTF8 >/dev/null
	pg pg_ctl -D "$dir/pg" -l "$dir/pg.log" -w -o "-p 5433 -k $dir -c listen_addresses= -c fsync=on -c synchronous_commit=on -c max_connections=200 -c shared_buffers=${SHARED_BUFFERS:-512MB}" start >/dev/null
	pg createdb -h "$dir" -p 5433 -U postgres scale
	db="postgres://postgres@/scale?host=$dir&port=5433"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/secret"
	args=(--secret-file "$dir/secret")
	export LEASEKEEPER_ADMIN_KEY=lkk_scale-loaded-0123456789abcdefghijklmnopqrstuvwxyz
fi

start() {
	local began=$(date +%s.%N)
	$bin serve --addr "$addr" --db "$db" --log-level warn --max-leases-per-key 0 "${args[@]}" & pid=$!
	until curl -sf "http://$addr/readyz" >/dev/null; do sleep 0.05; done
	echo "ready after $(echo "$(date +%s.%N) - $began" | bc) s"
}
stop() { kill "$pid"; wait "$pid" || true; }

start >/dev/null; stop # the schema and the admin key
now=$(date +%s%3N)
if [[ $backend == postgres ]]; then
	pg psql -q -v ON_ERROR_STOP=1 -h "$dir" -p 5433 -U postgres scale <<SQL
INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
SELECT $now * 1000 - $n - 1000 + i, 'job-' || lpad(i::text, 7, '0'), 'worker-' || (i % 64), sha256(int8send(i)), 3600000, 0,
	$now - (i * 7919) % 1500000, $now - (i * 7919) % 1500000, $now - (i * 7919) % 1500000 + 3600000, ''
FROM generate_series(0::bigint, $n - 1) i;
INSERT INTO names (name, token) SELECT name, token FROM grants;
UPDATE tokens SET last = $now * 1000;
VACUUM ANALYZE;
CHECKPOINT;
SQL
else
	sqlite3 "$db" <<SQL
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < $n - 1)
INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
SELECT $now * 1000 - $n - 1000 + i, printf('job-%07d', i), 'worker-' || (i % 64), randomblob(32), 3600000, 0,
	$now - (i * 7919) % 1500000, $now - (i * 7919) % 1500000, $now - (i * 7919) % 1500000 + 3600000, '' FROM c;
INSERT INTO names (name, token) SELECT name, token FROM grants;
UPDATE meta SET value = $now * 1000 WHERE key = 'last_token';
UPDATE meta SET value = $n WHERE key = 'open_grants';
PRAGMA wal_checkpoint(TRUNCATE);
SQL
fi

start >"$dir/start"
echo "restart with $n held leases: $(cat "$dir/start")"
key=${LEASEKEEPER_ADMIN_KEY:-$(cat "$db.admin-key" 2>/dev/null)}
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
