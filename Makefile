# The two commands of the README: `make demo` and `make test`.
GO ?= go
export PATH := $(PATH):/usr/local/go/bin

.PHONY: build demo test preflight bench bench-console bench-audit bench-purge bench-bulk bench-reconciler bench-exporter fuzz vet

build:
	$(GO) build -o bin/opsdesk ./cmd/opsdesk

# Runs the library on a throw-away PostgreSQL and shows what it does.
demo: build
	./bin/opsdesk demo

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

# Every test, with the race detector, against one throw-away PostgreSQL
# cluster that internal/pgcluster/testserver starts for the run, hands every
# package's test binary (OPSDESK_TEST_DSN; each test clones its own
# database) and removes when go test exits, passed, failed or interrupted.
# With OPSDESK_TEST_DSN set, that server instead. Fuzz seeds run as tests.
# The preflight names whatever program is missing before anything runs.
test: preflight
	@$(MAKE) --no-print-directory vet
	$(GO) run ./internal/pgcluster/testserver $(GO) test -race -count=1 -timeout 20m -parallel $(TEST_PARALLEL) $(SLOW_FIRST) ./...

# Most tests wait on PostgreSQL (and on leases, locks and timeouts they
# make expire), not on the CPU: go test's default of GOMAXPROCS parallel
# tests per package (2 here) left the cores idle. ops alone: 75 s -> 32 s
# with 8 (issue 20 §4, docs/benchmarks.md).
TEST_PARALLEL ?= 8

# go test starts packages in the order named (at most GOMAXPROCS at once):
# the slowest first (go test -json, docs/benchmarks.md, issue 20 §4), so that
# the run does not end on one long package while the other slots are idle.
SLOW_FIRST = ./internal/cli ./ops ./reconcile/desk ./ui ./internal/audit ./internal/retention ./internal/storeview

# Every program make test needs, or one message naming the missing ones and
# how to install them.
preflight:
	@scripts/preflight.sh

# The benchmarks and the DoTxCreate/RawCreate ratio (docs/benchmarks.md).
bench:
	scripts/bench.sh $(ROUNDS) $(BENCHTIME)

# The console's queries over a seeded store (OPSDESK_BENCH_ROWS, default
# 1,000,000): p95 of each, see docs/benchmarks.md.
bench-console:
	$(GO) test ./internal/storeview -run '^$$' -bench ConsoleQueries -benchtime 40x -timeout 60m

# The audit browser's queries over a seeded trail (OPSDESK_BENCH_AUDIT_ROWS,
# default 1,000,000): p95 of each, see docs/benchmarks.md.
bench-audit:
	$(GO) test ./internal/storeview -run '^$$' -bench AuditBrowse -benchtime 40x -timeout 60m

# A whole scrape of opsdesk exporter over a seeded store (OPSDESK_BENCH_ROWS,
# default 1,000,000): p95, see docs/benchmarks.md.
bench-exporter:
	$(GO) test ./internal/exporter -run '^$$' -bench ExporterScrape -benchtime 40x -timeout 60m

bench-purge:
	$(GO) test ./internal/retention -run '^$$' -bench PurgeUnderTraffic -benchtime 1x -timeout 60m

# Issue 13 §3: 1,000 stuck charges (OPSDESK_BENCH_BULK_RECORDS) reconciled
# by lookup against the demo's provider, as resolve --by-lookup does, at
# OPSDESK_BENCH_BULK_CONCURRENCY (default 8); see docs/benchmarks.md.
bench-bulk:
	$(GO) test ./reconcile/bulk -run '^$$' -bench BulkReconcile -benchtime 1x -timeout 30m -v

# Issue 23 §1: opsdesk reconciler, as a process and a login granted --as
# reconciler, over an outage of 1,000 charges (OPSDESK_BENCH_RECONCILER_RECORDS)
# against the demo's provider, then against that provider failing half its
# lookups; OPSDESK_BENCH_RECONCILER_INTERVAL, _RATE, _CONCURRENCY and
# _MAX_ERROR_RATE are its flags (the command's defaults unless set); see
# docs/benchmarks.md.
bench-reconciler:
	$(GO) test ./internal/cli -run '^$$' -bench 'Reconciler(Outage|HalfDownProvider)' -benchtime 1x -timeout 60m -v

# Explores canonicalization beyond the seed corpus.
fuzz:
	$(GO) test ./ops -run '^$$' -fuzz FuzzCanonical -fuzztime $(or $(FUZZTIME),60s)
