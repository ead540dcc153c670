#!/usr/bin/env bash
# The fencing demo (make demo): a worker paused past its lease writes with its old token,
# and the server refuses the write and records it.
#
#   1. start a leasekeeper server on a free port (a temp database, or $LEASEKEEPER_DB)
#   2. worker A acquires demo-lease (ttl 2 s), checks it still holds it, and is frozen with
#      SIGSTOP right there, between checking and writing
#   3. A's lease expires; worker B acquires it with a higher token and writes demo-resource
#   4. A is resumed with SIGCONT and writes with its old token: 409 stale_token
#   5. GET /v1/rejections shows the refusal; the dashboard shows it too
#
# DEMO_KEEP=1 leaves the server running afterwards so you can browse the dashboard.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d "${TMPDIR:-/tmp}/leasekeeper-demo.XXXXXX")
db=${LEASEKEEPER_DB:-$tmp/demo.db}
ttl=2s
server_pid= a_pid= b_pid=

cleanup() {
	for pid in $a_pid $b_pid; do
		kill -CONT "$pid" 2>/dev/null || true
		kill "$pid" 2>/dev/null || true
	done
	if [[ -n $server_pid && ${DEMO_KEEP:-} != 1 ]]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { sed 's/^/   /' "$@"; }
# wait_for FILE TEXT SECONDS: wait until FILE contains TEXT.
wait_for() {
	local i
	for ((i = 0; i < $3 * 20; i++)); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "demo: timed out waiting for '$2' in $1" >&2
	show "$1" >&2
	exit 1
}

step "building leasekeeper and the demo worker"
go build -o "$tmp/leasekeeper" ./cmd/leasekeeper
go build -o "$tmp/worker" ./examples/demo/worker

step "starting the server (database $db)"
# Authentication is on: the server takes its first admin key from LEASEKEEPER_ADMIN_KEY, and the
# demo gives the workers a writer key limited to names starting with "demo-".
admin_key=${LEASEKEEPER_ADMIN_KEY:-lkk_demo-$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')}
LEASEKEEPER_ADMIN_KEY=$admin_key "$tmp/leasekeeper" serve --addr 127.0.0.1:0 --db "$db" >"$tmp/server.out" 2>"$tmp/server.log" &
server_pid=$!
wait_for "$tmp/server.out" "listening on" 20
url=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$tmp/server.out" | head -n1)
export LEASEKEEPER_SERVER=$url
echo "   server at $url (pid $server_pid)"
LEASEKEEPER_API_KEY=$admin_key "$tmp/leasekeeper" keys create --label "demo workers" --role writer --prefix demo- --json >"$tmp/key.json"
export LEASEKEEPER_API_KEY=$(jq -r .key "$tmp/key.json")
echo "   workers use a writer key for demo-* ($(jq -r .record.id "$tmp/key.json"))"

step "worker A acquires demo-lease (ttl $ttl) and checks that it holds it"
"$tmp/worker" --holder worker-A --ttl "$ttl" --pause >"$tmp/a.log" 2>&1 &
a_pid=$!
wait_for "$tmp/a.log" "checked:" 10
show "$tmp/a.log"

step "freezing worker A (SIGSTOP) between its check and its write, past its ttl"
kill -STOP "$a_pid"
sleep 2.5
"$tmp/leasekeeper" get demo-lease | show

step "worker B acquires demo-lease (a higher token) and writes demo-resource"
"$tmp/worker" --holder worker-B --ttl "$ttl" --wait 10s >"$tmp/b.log" 2>&1 &
b_pid=$!
b_status=0
wait "$b_pid" || b_status=$?
b_pid=
show "$tmp/b.log"
if [[ $b_status != 0 ]]; then
	echo "demo: worker B exited $b_status, expected 0" >&2
	exit 1
fi

step "resuming worker A (SIGCONT): it writes with its OLD token, as a paused process would"
lines=$(wc -l <"$tmp/a.log")
kill -CONT "$a_pid"
a_status=0
wait "$a_pid" || a_status=$?
a_pid=
tail -n +"$((lines + 1))" "$tmp/a.log" | show
if [[ $a_status != 4 ]]; then
	echo "demo: worker A exited $a_status, expected 4 (stale write refused)" >&2
	exit 1
fi

step "the server recorded the refusal: GET /v1/rejections"
curl -fsS -H "Authorization: Bearer $LEASEKEEPER_API_KEY" "$url/v1/rejections?resource=demo-resource" | jq . | show

step "the resource holds B's write"
curl -fsS -H "Authorization: Bearer $LEASEKEEPER_API_KEY" -D "$tmp/headers" "$url/v1/resources/demo-resource" | show
grep -i '^fencing-token' "$tmp/headers" | show

echo
if [[ ${DEMO_KEEP:-} == 1 ]]; then
	echo "Open the dashboard at $url/ (rejections at $url/rejections) and sign in with the admin key $admin_key"
	echo "The server keeps running (pid $server_pid, database $db); stop it with: kill $server_pid"
	trap - EXIT
else
	echo "Done. Run with DEMO_KEEP=1 to keep the server (and its dashboard at $url/) running."
fi
