#!/usr/bin/env bash
# The training text of toy's bundled model: the King James Bible from Debian's
# bible-kjv-text package (public domain), read with its `bible` program (bible-kjv),
# one verse per line without its reference, a blank line between chapters. Every 25th
# chapter goes to the validation file instead of the training file.
#
# usage: scripts/kjv-corpus.sh OUTDIR   (writes OUTDIR/kjv-train.txt, OUTDIR/kjv-valid.txt)
set -euo pipefail
out="${1:?usage: $0 OUTDIR}"
if ! command -v bible > /dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "kjv-corpus: the bible program is missing (apt-get install bible-kjv)" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bible-kjv > /dev/null
fi
mkdir -p "$out"
bible -f "gen1:1-rev22:21" | awk -v train="$out/kjv-train.txt" -v valid="$out/kjv-valid.txt" '
  {
    ref = $1
    sub(/:[0-9]+$/, "", ref)          # "Ge1:1" -> "Ge1": the chapter
    if (ref != chapter) {
      if (chapter != "") print "" > file
      chapter = ref
      n++
      file = (n % 25 == 0) ? valid : train
    }
    $1 = ""
    sub(/^ /, "")
    print > file
  }'
wc -c "$out/kjv-train.txt" "$out/kjv-valid.txt" >&2
