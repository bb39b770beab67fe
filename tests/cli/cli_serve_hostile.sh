#!/usr/bin/env bash
# toy serve against hostile clients (tests/python/serve_hostile.py, standard-library Python): field
# types and ranges, Unicode, nesting, sizes, truncated, stalled and garbage requests, clients
# that leave, 1,000 connections against --max-connections, methods and paths, the browser
# guards (Content-Type, Host, Origin, CORS preflight), the API key, shutdown after
# --shutdown-grace; after every case a normal request is answered 200. No check depends on
# the machine's speed: it waits for events with generous deadlines.
. "$(dirname "$0")/../lib.sh"
python3 "$tests/python/serve_hostile.py" "$toy" "$bundled"
