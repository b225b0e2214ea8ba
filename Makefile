# The two commands of the README: `make demo` and `make test`; `make help` lists the rest.
# Both start LocalStack (as a host process, see localstack/launch.sh) when it is not running.

CARGO ?= cargo
export AWS_ENDPOINT_URL ?= http://127.0.0.1:$(or $(LOCALSTACK_PORT),4566)
# Clippy's driver, and `-D warnings` in the form `cargo clippy -- -D warnings` hands it over
# (arguments joined by its separator): make test builds with them (see test).
CLIPPY_DRIVER ?= $(shell rustc --print sysroot)/bin/clippy-driver
CLIPPY_DENY_WARNINGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__

.DEFAULT_GOAL := help
.PHONY: help demo ui chaos scale flow-kills book sim sim-reverts bench bench-flow test lint lint-rust fmt-check lint-no-default lint-infra build sam-build sam-deploy package deploy-localstack test-only test-with-lints localstack-start localstack-stop localstack-status localstack-docker localstack-docker-stop

## help: this list.
help:
	@grep -E '^## ' $(MAKEFILE_LIST) | sed 's/^## //' | awk -F': ' '{ t = $$1; sub(/^[^:]*: /, ""); printf "  make %-24s %s\n", t, $$0 }'

## demo: a day of the job catalog on LocalStack through two workers, then a redrive (LocalStack stays up).
demo: build localstack-start
	target/debug/demo

## ui: the operator's web page for stage STAGE (default dev; `make ui STAGE=demo` after `make demo`) on LISTEN (default 127.0.0.1:8080); prints the address to open.
ui: export AWS_ACCESS_KEY_ID ?= test
ui: export AWS_SECRET_ACCESS_KEY ?= test
ui: export AWS_REGION ?= us-east-1
ui: build
	target/debug/schedkit --stage $(STAGE) ui --listen $(or $(LISTEN),127.0.0.1:8080)

## chaos: the chaos run at N deliveries (default 10000): killed pollers, duplicates, an outage; prints the report.
chaos: build localstack-start
	target/debug/chaos --deliveries $(or $(N),10000)

## scale: the grown-catalog test at JOBS jobs (default 1000) and CHAINS chains (default 100) on LocalStack: render, lint, deploy, sync twice, an hour fired and run, the accountant, the failed alarm's query.
scale: build localstack-start
	SCHEDKIT_SCALE_JOBS=$(or $(JOBS),1000) SCHEDKIT_SCALE_CHAINS=$(or $(CHAINS),100) \
	  $(CARGO) test --locked --test integration catalog_at_scale -- --nocapture

## flow-kills: the flow-control kill test at N noisy runs (default 300): a fair limit of 2 through three workers, one SIGKILLed every 4 s; never over the limit, every run DONE once.
flow-kills: build localstack-start
	SCHEDKIT_FAIR_KILL_RUNS=$(or $(N),300) \
	  $(CARGO) test --locked --test integration flow_control::fair_and_urgent -- --nocapture

## book: the book (docs/book/) built into target/book/, every link inside it checked.
book:
	docs/book/build.sh

## sim: the deterministic simulation at SEEDS seeds (default 100000), release build, no LocalStack; prints the rate.
sim:
	SCHEDKIT_SIM_SEEDS=$(or $(SEEDS),100000) $(CARGO) test --release --locked -p schedkit --test library simulation -- --nocapture

## sim-reverts: reverts each worker fix of issue 21 in turn and checks the simulation finds it (SEEDS, default 4000; a clean checkout).
sim-reverts:
	SEEDS=$(or $(SEEDS),4000) shared/tests/simulation/reverts/run.sh

## bench: schedkit against Powertools for AWS Lambda (and its redrive against a one-by-one loop), release build;
#         writes bench/results.md, bench/results.json and bench/results.png. N deliveries (default 2000),
#         LETTERS dead letters (default 2000). 11 minutes on 2 cores (17 from a fresh clone: the release build).
## bench-flow: the bench's flow-control section alone, release build: each case's pace against its
#         limit's own and requests per run; N runs a case (default 300). Then a quiet tenant's and an urgent
#         run's wait behind BACKLOG queued runs (default 1000), and an urgent run's behind URGENT_BACKLOG
#         (default 10000). About 9 minutes.
bench-flow:
	$(CARGO) build --release --locked -p schedkit-bench --bin flow-bench -p schedkit-lambda-init --bin schedkit-lambda-init
	SCHEDKIT_LAMBDA_INIT=$${CARGO_TARGET_DIR:-$(CURDIR)/target}/release/schedkit-lambda-init \
	  localstack/launch.sh with $${CARGO_TARGET_DIR:-$(CURDIR)/target}/release/flow-bench --runs $(or $(N),300) --backlog-runs $(or $(BACKLOG),1000) --urgent-backlog-runs $(or $(URGENT_BACKLOG),10000)

bench:
	functions/package.sh --release worker
	$(CARGO) build --release --locked -p schedkit-bench --bin peer-bench -p schedkit-lambda-init --bin schedkit-lambda-init -p schedkit-console --bin schedkit
	SCHEDKIT_LAMBDA_INIT=$${CARGO_TARGET_DIR:-$(CURDIR)/target}/release/schedkit-lambda-init \
	  localstack/launch.sh with $${CARGO_TARGET_DIR:-$(CURDIR)/target}/release/peer-bench \
	  --deliveries $(or $(N),2000) --letters $(or $(LETTERS),2000) --out bench --readme README.md
	bench/chart.sh

## test: formatting, lints, the book, then every test, LocalStack integration tests included (what CI runs).
#        The pinned tools (LocalStack, DynamoDB Local, the lint, deploy and SAM CLI
#        virtualenvs) install in the background (a session of their own, sharing the CPU with the build) while rustfmt, clippy and the build run
#        (their log: target/install-tools.log). LocalStack is started if needed and
#        stopped again if this run started it, with the Lambda init the build made.
#        Clippy lints while the build compiles: every cargo command of this run has clippy's
#        driver as the workspace's compiler (RUSTC_WORKSPACE_WRAPPER, -D warnings), as
#        `cargo clippy` itself runs it, so the dependencies are compiled once instead of
#        checked for clippy and then built (`make lint` runs `cargo clippy` as usual).
#        Nothing is compiled incrementally (CARGO_INCREMENTAL=0: a fresh build gains nothing
#        from it, and writing its cache costs), but the simulation's reverts.
#        `sam build` builds the debug profile here (SAM_BUILD_MODE=debug: the same build in
#        half the time, as the tests run debug builds); `make sam-build` builds release. It
#        runs from the start at the idle scheduling class (SCHED_IDLE: only on CPU nothing
#        else wants, the build's serial stretches first, then what the tests leave), in a
#        cargo target directory of its own (target/sam-cargo: cargo locks a target directory
#        while it compiles, and cargo-lambda builds for an explicit target, so it shares no
#        unit with the build) and without clippy's driver (the build lints the same code).
#        In make's own session, not one of its own: Linux's autogroups share the CPU between
#        sessions equally, whatever the class within them. Started after the build, it
#        ended after the other tests, which waited for it (15 min 23 s in a fresh-clone run,
#        2026-12-06). The test that deploys its bootstrap waits for it
#        (SCHEDKIT_SAM_BUILD_STATUS: the file its exit status is written to; `set -m` gives
#        the build a process group of its own, ended when the build or the tests fail or
#        make is interrupted); its log, target/sam-build.log, is printed at the end. The
#        book's tools (mdBook compiles for half a CPU-minute) install after it at the same
#        class, so `make book` beside the tests finds them.
# bash: its `set -m` gives a background job a process group of its own without a terminal.
test: SHELL = bash
test: export RUSTC_WORKSPACE_WRAPPER = $(CLIPPY_DRIVER)
test: export CLIPPY_ARGS = $(CLIPPY_DENY_WARNINGS)
test: export CARGO_INCREMENTAL = 0
test:
	@mkdir -p target; target=$${CARGO_TARGET_DIR:-$(CURDIR)/target}; \
	setsid nice -n 19 infra/install-tools.sh >target/install-tools.log 2>&1 & installing=$$!; \
	rm -f $$target/sam-build.status; \
	if chrt --idle 0 true 2>/dev/null; then idle="chrt --idle 0"; else idle="nice -n 19"; fi; \
	set -m; \
	( $$idle env -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS SAM_BUILD_MODE=debug \
	    SAM_BUILD_DIR=$$target/sam CARGO_TARGET_DIR=$$target/sam-cargo \
	    infra/sam-build.sh >$$target/sam-build.log 2>&1; echo $$? >$$target/sam-build.status; \
	  $$idle infra/install-book-tools.sh >$$target/book-tools.log 2>&1 ) & building_sam=$$!; \
	set +m; \
	trap 'kill -- -'$$building_sam' 2>/dev/null' EXIT INT TERM; \
	if ! $(MAKE) --no-print-directory fmt-check build; then \
	  kill -- -$$installing 2>/dev/null; exit 1; \
	fi; \
	wait $$installing || { echo "make test: installing the tools failed:" >&2; cat target/install-tools.log >&2; exit 1; }; \
	cat target/install-tools.log; \
	SCHEDKIT_SAM_BUILD_STATUS=$$target/sam-build.status SCHEDKIT_LAMBDA_INIT=$$target/debug/schedkit-lambda-init \
	  localstack/launch.sh with $(MAKE) --no-print-directory test-with-lints; tested=$$?; \
	if [ $$tested -eq 0 ]; then \
	  wait $$building_sam; echo "make test: sam build (exit status $$(cat $$target/sam-build.status)):"; \
	  cat $$target/sam-build.log; \
	fi; \
	exit $$tested

## lint: rustfmt, clippy, the library without optional features, templates, shellcheck, ruff.
lint: lint-rust lint-infra

lint-rust: fmt-check lint-no-default
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt-check:
	$(CARGO) fmt --all -- --check

# The library without optional features, linted (make test runs it beside the integration
# tests), and the feature sets of unified-features/ checked against the workspace's. Built
# with clippy's driver as the compiler, as make test builds the workspace, with only the
# feature `unified-features` (it adds no code, only the workspace's dependency features):
# the dependencies are then the units the build compiled, and only the library is
# compiled again, where `cargo clippy` would check the whole graph again (1.7 CPU-minutes).
lint-no-default: export RUSTC_WORKSPACE_WRAPPER = $(CLIPPY_DRIVER)
lint-no-default: export CLIPPY_ARGS = $(CLIPPY_DENY_WARNINGS)
lint-no-default:
	unified-features/update.py --check
	$(CARGO) build -p schedkit --no-default-features --features unified-features --lib --locked

lint-infra:
	infra/lint.sh

## build: binaries and tests in one go, and the Lambda zips the tests deploy.
#         (Building the bins alone would resolve dependency features without the
#         dev-dependencies, so `cargo test` would compile most crates a second time.)
build:
	$(CARGO) build --workspace --bins --tests --locked
	functions/package.sh worker probe

## sam-build: the AWS path: `sam validate --lint` and `sam build` (release, x86_64) into target/sam/.
sam-build:
	infra/sam-build.sh

## sam-deploy: deploy what sam-build built to your AWS account as stage STAGE (default dev), then sync its schedules.
#        `sam deploy --guided` asks for the region and the other parameters; the endpoint
#        variable this Makefile sets for LocalStack is not passed on: this goes to AWS.
#        --resolve-s3: SAM's managed bucket holds the worker's zip, the chains' definitions
#        and, past CloudFormation's 51,200 inline bytes (a catalog with many chains), the
#        template itself.
STAGE ?= dev
sam-deploy: sam-build build
	env -u AWS_ENDPOINT_URL infra/.cache/sam-venv/bin/sam deploy --guided --resolve-s3 --template-file target/sam/template.yaml \
	  --capabilities CAPABILITY_IAM CAPABILITY_NAMED_IAM \
	  --stack-name schedkit-$(STAGE) --parameter-overrides Stage=$(STAGE)
	env -u AWS_ENDPOINT_URL target/debug/schedkit --stage $(STAGE) schedules sync --yes

## package: the example worker as a provided.al2023 zip for AWS (target/lambda/release/worker.zip).
package:
	functions/package.sh --release worker

## test-only: the tests alone, against a LocalStack that is already running (tests/run.sh: the
#        tests on LocalStack INTEGRATION_THREADS at a time, default 4, beside the rest at idle priority).
test-only:
	CARGO=$(CARGO) tests/run.sh

# The simulation's reverts (`make sim-reverts`, about six minutes of builds) are not part of
# it: CI runs under 15 minutes on two cores, and each revert compiles the library again.
# The infrastructure's lints, the library without its default features and the book run
# side by side (each mostly one process on one core): after both lanes of tests end, they
# were the run's last 100 s, one after another (fresh-clone run of 2026-12-06).
test-with-lints:
	CARGO=$(CARGO) tests/run.sh $(MAKE) --no-print-directory --keep-going -j3 --output-sync=target lint-infra lint-no-default book

## deploy-localstack: deploy infra/template.yaml to LocalStack as stage dev (prints the outputs), then sync its schedules.
deploy-localstack: build localstack-start
	infra/deploy-localstack.sh --stack schedkit-dev Stage=dev
	target/debug/schedkit --stage dev schedules sync --yes

## localstack-start: install LocalStack if needed and start it (reuses a running one).
localstack-start:
	localstack/launch.sh start

## localstack-stop: stop the LocalStack this checkout started.
localstack-stop:
	localstack/launch.sh stop

## localstack-status: whether LocalStack runs, and where.
localstack-status:
	localstack/launch.sh status

## localstack-docker: LocalStack in Docker instead (needs a Docker engine); waits until it answers.
localstack-docker:
	docker compose -f localstack/docker-compose.yml up -d
	@for _ in $$(seq 120); do localstack/launch.sh status 2>/dev/null && exit 0; sleep 1; done; \
	    echo "localstack: the Docker LocalStack did not answer within 120 s (docker compose -f localstack/docker-compose.yml logs)" >&2; exit 1

## localstack-docker-stop: stop the Docker LocalStack.
localstack-docker-stop:
	docker compose -f localstack/docker-compose.yml down
