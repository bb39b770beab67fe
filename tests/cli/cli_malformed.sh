#!/usr/bin/env bash
# cli_malformed.sh TOY — `toy info` on every malformed GGUF that test_gguf_malformed
# writes: each must exit non-zero (not by a signal), print nothing on stdout and exactly
# one line on stderr naming the file.
[ $# -ge 1 ] || { echo "usage: cli_malformed.sh PATH_TO_toy"; exit 1; }
. "$(dirname "$0")/../lib.sh"
gen=$build/test_gguf_malformed
[ -x "$gen" ] || skip "$gen not built (it writes the malformed files)"

mkdir "$tmp/files"
"$gen" --write-malformed "$tmp/files" >/dev/null || { echo "FAIL: $gen could not write the files"; exit 1; }

fails=0
n=0
for f in "$tmp"/files/*.gguf; do
  n=$((n + 1))
  "$toy" info "$f" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  name=$(basename "$f")
  problem=
  if [ "$rc" -eq 0 ]; then
    problem="exit status 0"
  elif [ "$rc" -ge 126 ]; then
    problem="exit status $rc (a crash or a signal)"
  elif [ -s "$tmp/out" ]; then
    problem="printed to stdout"
  elif [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ "$(tail -c 1 "$tmp/err" | od -An -c | tr -d ' ')" != '\n' ]; then
    problem="stderr is not exactly one line"
  elif ! grep -qF -- "$name" "$tmp/err"; then
    problem="stderr does not name the file"
  fi
  if [ -n "$problem" ]; then
    fails=$((fails + 1))
    echo "FAIL $name: $problem"
    sed 's/^/  stdout: /' "$tmp/out" | head -5
    sed 's/^/  stderr: /' "$tmp/err" | head -10
  fi
done

if [ "$n" -eq 0 ]; then
  echo "FAIL: no malformed files were written"
  exit 1
fi
if [ "$fails" -ne 0 ]; then
  echo "cli_malformed: $fails of $n files failed"
  exit 1
fi
echo "cli_malformed: ok ($n files)"
