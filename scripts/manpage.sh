#!/usr/bin/env bash
# Writes the man page toy.1 from the command's own help: `toy --help`, then each
# command's --help (and a sub-command's, such as `toy tokenizer train --help`), as
# preformatted text. Usage: manpage.sh TOY_BINARY OUT
set -euo pipefail
toy=$1 out=$2

# roff: a backslash is \e; a line starting with . or ' would be a request
roff() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

version=$("$toy" --version | awk '{print $2}')
commands=$("$toy" --help | awk '/^commands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}')

{
  echo ".TH TOY 1 \"\" \"toy $version\" \"User Commands\""
  echo ".SH NAME"
  echo "toy \\- run, serve and train llama-family language models stored as GGUF files"
  echo ".SH SYNOPSIS"
  echo ".B toy"
  echo ".I COMMAND"
  echo "[\\fIOPTIONS\\fR]"
  echo ".SH DESCRIPTION"
  echo ".nf"
  "$toy" --help | roff
  echo ".fi"
  echo ".SH COMMANDS"
  for c in $commands; do
    help=$("$toy" "$c" --help)
    echo ".SS toy $c"
    echo ".nf"
    printf '%s\n' "$help" | roff
    echo ".fi"
    # sub-commands named in the help as "(toy CMD SUB --help)"
    for sub in $(printf '%s\n' "$help" | sed -n "s/.*(toy $c \([a-z]*\) --help).*/\1/p"); do
      echo ".SS toy $c $sub"
      echo ".nf"
      "$toy" "$c" "$sub" --help | roff
      echo ".fi"
    done
  done
  echo ".SH ENVIRONMENT"
  echo ".TP"
  echo ".B TOY_ISA"
  echo "scalar, avx2 or avx512: use at most that instruction set (the results are the same bits)."
  echo ".TP"
  echo ".B TOY_REPACK"
  echo "0: multiply the weights in the file's layout, not repacked into groups of rows (the same bits)."
  echo ".TP"
  echo ".B TOY_MODEL"
  echo "the model of toy run and toy chat without \\-m (default: the bundled toy-kjv.gguf)."
  echo ".SH SEE ALSO"
  echo "The README of the source tree, the C API in toy.h, pkg-config \\-\\-libs toy."
} > "$out.tmp"
mv "$out.tmp" "$out"
