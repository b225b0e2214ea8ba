# The two commands of the README: `make demo` and `make test`.
# Both start LocalStack (as a host process, see localstack/launch.sh) when it is not running.

CARGO ?= cargo
export AWS_ENDPOINT_URL ?= http://127.0.0.1:$(or $(LOCALSTACK_PORT),4566)

.PHONY: demo test lint build package deploy-localstack test-only localstack-start localstack-stop localstack-status

## demo: run the burst of envelopes through two workers and print the report (LocalStack stays up).
demo: build localstack-start
	target/debug/demo

## test: formatting, lints, then every test, LocalStack integration tests included.
##       LocalStack is started if needed and stopped again if this run started it.
test:
	localstack/launch.sh with $(MAKE) --no-print-directory lint build test-only

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings
	infra/lint.sh

## build: binaries and tests in one go. Building the bins alone would resolve dependency
##        features without the dev-dependencies, so `cargo test` would compile most
##        crates a second time.
build:
	$(CARGO) build --workspace --bins --tests --locked
	functions/package.sh worker probe

## package: the worker as a provided.al2023 zip for AWS (target/lambda/release/worker.zip).
package:
	functions/package.sh --release worker

test-only:
	$(CARGO) test --workspace --locked

## deploy-localstack: deploy infra/template.yaml to LocalStack as stage dev; prints the outputs.
deploy-localstack: build localstack-start
	infra/deploy-localstack.sh --stack schedkit-dev Stage=dev

localstack-start:
	localstack/launch.sh start

localstack-stop:
	localstack/launch.sh stop

localstack-status:
	localstack/launch.sh status
