# The user's entry points. `make test` and `make run` each do the whole set-up on a
# fresh Debian 12 machine: install missing packages, configure, build. Each target asks
# scripts/install-deps.sh for its tier only (`make`: build; `make run`: run; `make test` and
# `make test-sanitize`: test; `make fuzz`: fuzz); as a user other than root, a missing
# package stops it with the `sudo apt-get install` line that installs it.
BUILD      ?= build
BUILD_SAN  ?= build-sanitize
BUILD_FUZZ ?= build-fuzz
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
FUZZ_SECONDS ?= 60
PREFIX     ?= /usr/local

.PHONY: all deps build test run install uninstall deb test-sanitize fuzz clean

all: build

# The tier of the target make was asked for reaches deps through its prerequisites; deps runs
# once, so test, test-sanitize and fuzz ask for their tier again (`make run test`).
TIER = build
run: TIER = run
test test-sanitize: TIER = test
fuzz: TIER = fuzz
deps:
	@bash scripts/install-deps.sh $(TIER)

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Configured again: Open MPI, which the test tier adds, is then found even where `make`
# configured $(BUILD) before it was installed (cli_mpi runs instead of skipping).
test: build
	@bash scripts/install-deps.sh test
	cmake -S . -B $(BUILD) > /dev/null
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# A passage from the bundled model (models/toy-kjv.gguf, trained by toy on the King James
# Bible; see README.md for how). Only the command is built, not the tests and examples.
run: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target toy
	$(BUILD)/toy run -p "And it came to pass" -n 120

# The command, libtoy (shared and static), toy.h, toy.pc, the CMake package, the man page
# and the bundled model under PREFIX (DESTDIR=D stages them under D, as packagers do).
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig > /dev/null; then ldconfig; fi

# Removes what the last install wrote (listed in $(BUILD)/install_manifest.txt, without
# DESTDIR: give the same DESTDIR again).
uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "uninstall: nothing installed from $(BUILD)"; exit 1; }
	sed 's|^|$(DESTDIR)|' $(BUILD)/install_manifest.txt | xargs -d '\n' rm -f
	rmdir "$(DESTDIR)$(PREFIX)/share/toy" "$(DESTDIR)$(PREFIX)/lib/cmake/toy" 2>/dev/null || true
	rm -f $(BUILD)/install_manifest.txt

# Debian packages toy_VERSION_ARCH.deb and libtoy-dev_VERSION_ARCH.deb, in $(BUILD)/.
deb: build
	bash scripts/make-deb.sh $(BUILD) $(BUILD)

# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer (clang).
test-sanitize: deps
	@bash scripts/install-deps.sh test
	CC=clang cmake -S . -B $(BUILD_SAN) -DCMAKE_BUILD_TYPE=Debug -DTOY_SANITIZE=ON
	cmake --build $(BUILD_SAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(BUILD_SAN) --output-on-failure -j $(JOBS)

# Short libFuzzer runs (FUZZ_SECONDS each) of every target in fuzz/: the GGUF reader, the
# tokenizer, chat template families, the Jinja engine, the training-data loader, toy serve's
# request checks and grammars, each
# seeded with its regression corpus (fuzz/corpus for the GGUF reader, fuzz/corpus_NAME for
# fuzz/fuzz_NAME.c).
FUZZ_TARGETS = fuzz_gguf fuzz_tokenizer fuzz_chat_template fuzz_jinja fuzz_train_data fuzz_request fuzz_grammar
fuzz: deps
	@bash scripts/install-deps.sh fuzz
	CC=clang cmake -S . -B $(BUILD_FUZZ) -DCMAKE_BUILD_TYPE=Debug -DTOY_SANITIZE=ON -DTOY_FUZZ=ON
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target $(FUZZ_TARGETS)
	mkdir -p $(BUILD_FUZZ)/corpus
	$(BUILD_FUZZ)/fuzz_gguf -max_total_time=$(FUZZ_SECONDS) -max_len=65536 \
	  -rss_limit_mb=2048 $(BUILD_FUZZ)/corpus fuzz/corpus
	for t in $(filter-out fuzz_gguf,$(FUZZ_TARGETS)); do \
	  mkdir -p $(BUILD_FUZZ)/corpus_$${t#fuzz_} && \
	  $(BUILD_FUZZ)/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=2048 \
	    $(BUILD_FUZZ)/corpus_$${t#fuzz_} fuzz/corpus_$${t#fuzz_} || exit 1; \
	done

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ)
