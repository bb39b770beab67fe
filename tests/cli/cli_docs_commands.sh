#!/usr/bin/env bash
# docs/commands.md describes every command: each command that `toy --help` lists has a
# section headed "## toy COMMAND" (with its subcommand, as "## toy tokenizer train", when
# its usage names one), and every flag (--xxx and -x) that the command's --help prints
# appears in that section. And every relative link of README.md, CHANGELOG.md and
# docs/*.md leads to a file that exists (and to a heading of it, for #anchors into
# Markdown). Fails naming each missing section, flag and link.
. "$(dirname "$0")/../lib.sh"
doc="$src/docs/commands.md"
[ -f "$doc" ] || { echo "FAIL: $doc not found"; exit 1; }

commands=$("$toy" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1; next } on { on = 0 }')
[ -n "$commands" ] || { echo "FAIL: toy --help lists no commands"; exit 1; }

# The lines of docs/commands.md from the heading "## toy NAME" (followed by a space, a
# dash or the end of the line) up to the next "## " heading.
section() {
  awk -v name="## toy $1" '
    /^## / { on = (index($0, name) == 1 && (length($0) == length(name) || substr($0, length(name) + 1, 1) == " ")); next }
    on' "$doc"
}

n_flags=0
for cmd in $commands; do
  help=$("$toy" "$cmd" --help 2>&1) || { echo "FAIL: toy $cmd --help exits non-zero"; fail=1; continue; }
  name="$cmd"
  # a command with subcommands (toy tokenizer train, toy lora merge) names one in its usage
  sub=$(printf '%s\n' "$help" | awk 'NR == 1 && $1 == "usage:" && $2 == "toy" { print $4; exit }')
  if [[ "$sub" =~ ^[a-z]+$ ]]; then
    name="$cmd $sub"
    help=$("$toy" "$cmd" "$sub" --help 2>&1) || { echo "FAIL: toy $name --help exits non-zero"; fail=1; continue; }
  fi
  text=$(section "$name")
  if [ -z "$text" ]; then
    echo "FAIL: docs/commands.md has no section \"## toy $name\""; fail=1; continue
  fi
  flags=$(printf '%s\n' "$help" | grep -oE '(^|[^[:alnum:]_-])(--[a-z0-9][a-z0-9-]*|-[a-zA-Z])([^[:alnum:]_-]|$)' |
          grep -oE -- '--?[a-zA-Z0-9][a-z0-9-]*' | sort -u)
  for f in $flags; do
    n_flags=$((n_flags + 1))
    if ! printf '%s\n' "$text" | grep -qE -- "(^|[^[:alnum:]_-])$f([^[:alnum:]_-]|\$)"; then
      echo "FAIL: toy $name: $f (in toy $name --help) is missing from docs/commands.md"
      fail=1
    fi
  done
done
[ "$n_flags" -gt 50 ] || die "only $n_flags flags found in the --help texts"
python3 - "$src" <<'PY' || fail=1
import glob, os, re, sys
os.chdir(sys.argv[1])

def slug(heading):  # GitHub's anchor of a heading
    heading = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return heading.replace(" ", "-")

def anchors(path):
    found, fenced = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            found.add(slug(re.sub(r"^#+ ", "", line.rstrip("\n"))))
    return found

bad = 0
for f in ["README.md", "CHANGELOG.md"] + sorted(glob.glob("docs/*.md")):
    text = re.sub(r"```.*?```", "", open(f, encoding="utf-8").read(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, frag = target.partition("#")
        full = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(full):
            print(f"FAIL: {f}: link {target}: {full} does not exist")
            bad += 1
        elif frag and full.endswith(".md") and frag not in anchors(full):
            print(f"FAIL: {f}: link {target}: {full} has no heading #{frag}")
            bad += 1
sys.exit(1 if bad else 0)
PY
[ "$fail" = 0 ] && echo "docs/commands.md: every flag of $(echo $commands | wc -w) commands ($n_flags flags); every relative link leads somewhere"
exit "$fail"
