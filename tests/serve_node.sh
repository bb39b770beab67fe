# serve_node.sh — sourced by the tests that drive toy serve with the npm clients of
# tests/node: node_ready, and serve_start / serve_stop around a toy serve on a free port.
# Uses $toy and $here; sets $pid and $port; a failure sets fail=1.

# True when node, npm and the packages of tests/node/package-lock.json are there (npm ci
# once); else says why ("SKIP" when node or npm is missing).
node_ready() {
  if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
    echo "SKIP${1:+ ($1)}: node and npm are needed (apt-get install nodejs npm)"
    return 1
  fi
  if [ ! -d "$here/node/node_modules/openai" ]; then
    (cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error) || { echo "FAIL: npm ci in tests/node"; fail=1; return 1; }
  fi
}

serve_log=$(mktemp)
pid=
trap '[ -n "$pid" ] && kill $pid 2> /dev/null; rm -f "$serve_log"' EXIT

# toy serve ARGS... on a free port: sets pid and port (empty when it did not start)
serve_start() {
  "$toy" serve --port 0 -t 2 "$@" 2> "$serve_log" &
  pid=$!
  port=""
  for i in $(seq 1 100); do
    port=$(grep -o 'http://127.0.0.1:[0-9]*' "$serve_log" | cut -d: -f3)
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { echo "FAIL: toy serve did not start: $(cat "$serve_log")"; fail=1; }
}

# SIGTERM: toy serve must exit 0
serve_stop() {
  kill -TERM $pid
  wait $pid || { echo "FAIL: toy serve exited with $? after SIGTERM"; fail=1; }
  pid=
}
