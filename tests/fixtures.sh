# Sourced by the cli_*.sh tests that need the reference fixtures: sets $fixtures to
# $TOY_FIXTURES or ../shared/fixtures beside the source tree, or skips the test (exit
# 77, ctest's skip code) with a message when they are not there.
fixtures="${TOY_FIXTURES:-$TOY_SOURCE_DIR/../shared/fixtures}"
if [ ! -f "$fixtures/README.md" ]; then
  echo "SKIP: fixtures not found at $fixtures (set TOY_FIXTURES)"
  exit 77
fi
