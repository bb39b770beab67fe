#!/usr/bin/env bash
# No two source files call into each other or include each other, directly or around a
# longer loop (scripts/check-cycles.py over this build's object files and src/ and tools/).
. "$(dirname "$0")/../lib.sh"
command -v nm > /dev/null || skip "nm (binutils) not installed"
python3 "$src/scripts/check-cycles.py" "$build" || exit 1
# the check finds a cycle where there is one: two files of a scratch tree that call each other
mkdir -p "$tmp/src/a" "$tmp/obj/t.dir/src/a"
printf 'int g(void);\nint f(void) { return g(); }\n' > "$tmp/src/a/x.c"
printf 'int f(void);\nint g(void) { return f() + 1; }\n' > "$tmp/src/a/y.c"
for f in x y; do cc -c "$tmp/src/a/$f.c" -o "$tmp/obj/t.dir/src/a/$f.c.o" || exit 1; done
mkdir -p "$tmp/scripts" && cp "$src/scripts/check-cycles.py" "$tmp/scripts/"
out=$(python3 "$tmp/scripts/check-cycles.py" "$tmp/obj") && { echo "FAIL: a cycle of calls passed: $out"; exit 1; }
grep -q "a cycle of calls between src/a/x, src/a/y" <<< "$out" || { echo "FAIL: the cycle was not named: $out"; exit 1; }
echo "cli_cycles: ok"
