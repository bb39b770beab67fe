#!/usr/bin/env bash
# Two toy serve replicas behind nginx (Debian's) on the loopback interface, with the
# configuration the README shows (docs/nginx-toy.conf): streaming completions through
# nginx arrive whole, both replicas serve, /health answers through it, and with one
# replica stopped the other takes every request.
. "$(dirname "$0")/../lib.sh"
command -v nginx > /dev/null || skip "nginx is missing (apt-get install nginx)"
pids=()
at_exit 'for p in "${pids[@]}"; do kill $p 2> /dev/null; done'

"$toy" serve --port 0 --parallel 2 -t 1 > /dev/null 2> "$tmp/r1.log" &
pid1=$!
pids+=($pid1)
"$toy" serve --port 0 --parallel 2 -t 1 > /dev/null 2> "$tmp/r2.log" &
pid2=$!
pids+=($pid2)
p1=$(serve_port "$tmp/r1.log" $pid1)
p2=$(serve_port "$tmp/r2.log" $pid2)
[ -n "$p1" ] && [ -n "$p2" ] || { echo "FAIL: the replicas did not start"; exit 1; }
front=$(python3 "$py" free-port)

# the README's configuration, with this test's ports and a prefix of its own
sed -e "s/127.0.0.1:8081/127.0.0.1:$p1/; s/127.0.0.1:8082/127.0.0.1:$p2/; s/listen 127.0.0.1:8080;/listen 127.0.0.1:$front;/" \
    -e "s|^http {|http {\n    access_log off; client_body_temp_path $tmp/body; proxy_temp_path $tmp/proxy;|" \
    "$src/docs/nginx-toy.conf" > "$tmp/nginx.conf"
nginx -p "$tmp" -c "$tmp/nginx.conf" -g "daemon off; pid $tmp/nginx.pid; error_log $tmp/error.log;" > /dev/null 2>&1 &
pids+=($!)
poll_until 120 curl -s -o /dev/null "http://127.0.0.1:$front/health" \
  || { echo "FAIL: nginx does not answer on port $front: $(tail -3 "$tmp/error.log" 2> /dev/null)"; exit 1; }

drive() { # N CLIENTS through nginx: every stream whole
  python3 - "$front" "$1" <<'PY'
import http.client, json, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
ok = []
def client(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)  # a hang, not a slow machine
    c.request("POST", "/v1/completions", json.dumps({"prompt": "And God said", "max_tokens": 16 + i, "seed": i,
              "stream": True, "ignore_eos": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    ok.append(r.status == 200 and data.count("data: ") == 16 + i + 2 and data.endswith("data: [DONE]\n\n"))
th = [threading.Thread(target=client, args=(i,)) for i in range(n)]
[t.start() for t in th]
[t.join() for t in th]
print(f"{sum(ok)}/{n} streams whole")
sys.exit(0 if all(ok) and len(ok) == n else 1)
PY
}
drive 8 || die "streams through nginx"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$front/health")" = 200 ] || die "/health through nginx"
served() { curl -s "http://127.0.0.1:$1/metrics" | awk '/^toy_requests_total\{status="200"\}/ {print $2}'; }
s1=$(served "$p1"); s2=$(served "$p2")
echo "requests answered: replica 1 $s1, replica 2 $s2"
[ "${s1:-0}" -gt 1 ] && [ "${s2:-0}" -gt 1 ] || die "both replicas should serve (got $s1 and $s2)"

kill -TERM "$pid1"
wait "$pid1" || die "replica 1 exited with $? on SIGTERM"
drive 4 || die "streams through nginx with one replica down"
exit $fail
