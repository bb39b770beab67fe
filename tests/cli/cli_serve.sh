#!/usr/bin/env bash
# toy serve over HTTP (tests/python/serve_test.py, standard-library Python): the same tokens as
# toy run alone and under concurrency, chat, n, stop, logprobs, usage, the bad-request
# statuses, a client leaving mid-stream, a full queue, the API key, SIGTERM.
. "$(dirname "$0")/../lib.sh"
python3 "$tests/python/serve_test.py" "$toy" "$bundled"
