# throwaway-db.sh, sourced by the scripts that measure a server on a database of their own:
# a temporary directory ($dir, removed on exit with the server $pid and the cluster), and in it
# the server's database: with backend=postgres a PostgreSQL cluster on port $pgport (fsync and
# synchronous_commit on, and the -c settings in $pgopts) holding database $dbname, else the
# SQLite file $dir/$dbname.db. It sets db and args (serve's --db and further flags) and
# LEASEKEEPER_ADMIN_KEY on PostgreSQL (on SQLite the server writes its admin key beside the
# database: admin_key reads either), and defines seed_held.
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
db=$dir/$dbname.db
args=()
if [[ $backend == postgres ]]; then
	[[ -x $pgbin/initdb ]] || { echo "no PostgreSQL programs (set PGBIN)" >&2; exit 1; }
	[[ $(id -u) == 0 ]] && chown postgres "$dir"
	pg initdb -D "$dir/pg" -A trust -U postgres -E UTF8 >/dev/null
	pg pg_ctl -D "$dir/pg" -l "$dir/pg.log" -w -o "-p $pgport -k $dir -c listen_addresses= -c fsync=on -c synchronous_commit=on -c max_connections=200 ${pgopts:-}" start >/dev/null
	pg createdb -h "$dir" -p "$pgport" -U postgres "$dbname"
	db="postgres://postgres@/$dbname?host=$dir&port=$pgport"
	head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/secret"
	args=(--secret-file "$dir/secret")
	export LEASEKEEPER_ADMIN_KEY=lkk_throwaway-db-0123456789abcdefghijklmnopqrstuvwxyz
fi

# sql runs standard input's SQL on the database.
sql() {
	if [[ $backend == postgres ]]; then
		pg psql -Atq -v ON_ERROR_STOP=1 -h "$dir" -p "$pgport" -U postgres "$dbname" "$@"
	else
		sqlite3 "$db" "$@"
	fi
}

# admin_key prints the server's admin key.
admin_key() { echo "${LEASEKEEPER_ADMIN_KEY:-$(cat "$db.admin-key" 2>/dev/null)}"; }

# seed_held N TTL RENEWED writes N held leases job-0000000 … straight into the database (the
# server stopped, its schema made): ttl TTL ms, renewed (and acquired) at RENEWED, an SQL
# expression of i, the lease's number, and of now, the time in ms; tokens below the last one.
seed_held() {
	local n=$1 ttl=$2 now
	now=$(date +%s%3N)
	local renewed=${3//now/$now}
	if [[ $backend == postgres ]]; then
		sql <<SQL
INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
SELECT $now * 1000 - $n - 1000 + i, 'job-' || lpad(i::text, 7, '0'), 'worker-' || (i % 64), sha256(int8send(i)), $ttl, 0,
	$renewed, $renewed, $renewed + $ttl, ''
FROM generate_series(0::bigint, $n - 1) i;
INSERT INTO names (name, token) SELECT name, token FROM grants;
UPDATE tokens SET last = $now * 1000;
VACUUM ANALYZE;
CHECKPOINT;
SQL
	else
		sql <<SQL
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < $n - 1)
INSERT INTO grants (token, name, holder, id_hash, ttl_ms, lock_delay_ms, acquired_at, renewed_at, expires_at, owner)
SELECT $now * 1000 - $n - 1000 + i, printf('job-%07d', i), 'worker-' || (i % 64), randomblob(32), $ttl, 0,
	$renewed, $renewed, $renewed + $ttl, '' FROM c;
INSERT INTO names (name, token) SELECT name, token FROM grants;
UPDATE meta SET value = $now * 1000 WHERE key = 'last_token';
UPDATE meta SET value = $n WHERE key = 'open_grants';
PRAGMA wal_checkpoint(TRUNCATE);
SQL
	fi
}
