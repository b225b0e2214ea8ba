//! Traces over OTLP, through the `tracing` stack the logs already use: off unless
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; on AWS
//! that is the ADOT Lambda layer's collector on `localhost:4318`, which sends to X-Ray.
//!
//! A run's trace (ids: [`super::trace_ids`]):
//! - its own span (`run <key>`, or `chain <key>` for a chain run), from its scheduled time
//!   to its end, written when it ends for good: the trace's root, or for a chain's step a
//!   child of its chain run's span;
//! - the trigger's span, when the message carried one (`schedkit fire` writes it);
//! - one span per delivery of its message (`attempt N` when it ran, else what it was:
//!   `duplicate`, `in progress elsewhere`, ...) under the trigger's span or the run's, with
//!   the key, attempt and outcome as attributes, and under it `claim`, `job`, `commit` or
//!   `finish`, `dead letter` and `chain answer`;
//! - a chain run's `chain start` and `chain end`.
//!
//! The spans with ids of their own (a run's, from its key) are written through the SDK
//! with an id generator that hands out the ids asked for: the SDK takes no span id from
//! its caller, and these must be the ones every process works out for itself.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::SystemTime;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::trace_ids::{RemoteSpan, run_span_id, trace_id};

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

thread_local! {
    /// The ids the next span started on this thread must have (see the module's docs).
    static NEXT_IDS: Cell<Option<([u8; 16], [u8; 8])>> = const { Cell::new(None) };
}

/// Random ids, except for the span whose ids [`NEXT_IDS`] holds.
#[derive(Debug, Default)]
struct KeyedIds(RandomIdGenerator);

impl IdGenerator for KeyedIds {
    fn new_trace_id(&self) -> TraceId {
        match NEXT_IDS.with(Cell::get) {
            Some((trace, _)) => TraceId::from_bytes(trace),
            None => self.0.new_trace_id(),
        }
    }

    fn new_span_id(&self) -> SpanId {
        match NEXT_IDS.with(Cell::get) {
            Some((_, span)) => SpanId::from_bytes(span),
            None => self.0.new_span_id(),
        }
    }
}

/// Whether an OTLP endpoint is configured.
fn configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// The OTLP pipeline, when configured: the provider (kept for [`flush`]) and its layer.
pub(super) fn layer<S>()
-> Option<tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::SdkTracer>>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    if !configured() {
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("traces are off: the OTLP exporter could not be built: {e}");
            return None;
        }
    };
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "schedkit".into());
    let provider = SdkTracerProvider::builder()
        .with_id_generator(KeyedIds::default())
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    let tracer = provider.tracer("schedkit");
    let _ = PROVIDER.set(provider);
    Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_level(false)
            .with_threads(false)
            .with_location(false)
            .with_target(false)
            .with_tracked_inactivity(false),
    )
}

/// Sends what is buffered (the end of a Lambda invocation, which freezes the process,
/// and of a one-off check); nothing without an endpoint.
pub async fn flush() {
    if let Some(provider) = PROVIDER.get().cloned() {
        let _ = tokio::task::spawn_blocking(move || provider.force_flush()).await;
    }
}

/// Sends what is buffered and stops the exporter (the process ends).
pub fn shutdown() {
    if let Some(provider) = PROVIDER.get() {
        let _ = provider.shutdown();
    }
}

fn context_of(span: RemoteSpan) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from_bytes(span.trace_id),
        SpanId::from_bytes(span.span_id),
        if span.sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        },
        true,
        TraceState::default(),
    ))
}

/// The span of the run `key` in the trace of `root_key`.
pub(crate) fn run_span(root_key: &str, key: &str) -> RemoteSpan {
    RemoteSpan {
        trace_id: trace_id(root_key),
        span_id: run_span_id(key),
        sampled: true,
    }
}

/// The span of one delivery of the run `key` (of the trace of `root_key`), entered for
/// the rest of the delivery's walk: a child of the trigger's span when the message
/// carried one of this trace, else of the run's own; another trace's header (an X-Ray
/// one) is linked. Without traces, a span that goes nowhere.
pub(crate) fn delivery_span(
    job: &str,
    root_key: &str,
    key: &str,
    carried: Option<RemoteSpan>,
) -> tracing::Span {
    let span = tracing::info_span!(
        "delivery",
        otel.name = format!("deliver {job}"),
        schedkit.job = job,
        schedkit.key = key,
        schedkit.attempt = tracing::field::Empty,
        schedkit.outcome = tracing::field::Empty,
    );
    if PROVIDER.get().is_none() {
        return span;
    }
    let own = run_span(root_key, key);
    let parent = match carried {
        Some(c) if c.trace_id == own.trace_id => c,
        Some(other) => {
            span.add_link(context_of(other).span().span_context().clone());
            own
        }
        None => own,
    };
    let _ = span.set_parent(context_of(parent));
    span
}

/// Writes a span whose ids are `ids` (a run's own), from `start` to `end`, under
/// `parent` (None: the trace's root).
fn write_span(
    name: String,
    ids: RemoteSpan,
    parent: Option<RemoteSpan>,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<KeyValue>,
) {
    let Some(provider) = PROVIDER.get() else {
        return;
    };
    let tracer = provider.tracer("schedkit");
    let parent = parent.map(context_of).unwrap_or_default();
    NEXT_IDS.with(|n| n.set(Some((ids.trace_id, ids.span_id))));
    let mut span = tracer
        .span_builder(name)
        .with_start_time(start)
        .with_attributes(attributes)
        .start_with_context(&tracer, &parent);
    NEXT_IDS.with(|n| n.set(None));
    opentelemetry::trace::Span::end_with_timestamp(&mut span, end);
}

/// A run's own span, written when it ends for good (`outcome`): from its trigger
/// (`start`) to now, the root of its trace, or under its chain run's span for a step.
pub(crate) fn run_ended(
    key: &str,
    chain_key: Option<&str>,
    job: &str,
    start: SystemTime,
    outcome: &str,
) {
    let root = chain_key.unwrap_or(key);
    let parent = chain_key.map(|c| run_span(c, c));
    write_span(
        format!("run {job}"),
        run_span(root, key),
        parent,
        start.min(SystemTime::now()),
        SystemTime::now(),
        vec![
            KeyValue::new("schedkit.key", key.to_string()),
            KeyValue::new("schedkit.job", job.to_string()),
            KeyValue::new("schedkit.outcome", outcome.to_string()),
        ],
    );
}

/// A chain run's moment (`chain start`, `chain end`) under the trigger's span its message
/// carried (of this trace), else under the run's; at its end, the chain run's own span
/// too (the trace's root), from its scheduled time.
pub(crate) fn chain_event(
    chain: &str,
    key: &str,
    event: &str,
    carried: Option<RemoteSpan>,
    began: SystemTime,
    run_start: Option<SystemTime>,
) {
    let own = run_span(key, key);
    let Some(provider) = PROVIDER.get() else {
        return;
    };
    let tracer = provider.tracer("schedkit");
    let parent = carried
        .filter(|c| c.trace_id == own.trace_id)
        .unwrap_or(own);
    let mut span = tracer
        .span_builder(format!("{event} {chain}"))
        .with_start_time(began)
        .with_attributes(vec![KeyValue::new("schedkit.key", key.to_string())])
        .start_with_context(&tracer, &context_of(parent));
    opentelemetry::trace::Span::end(&mut span);
    if let Some(start) = run_start {
        write_span(
            format!("chain {chain}"),
            own,
            None,
            start.min(began),
            SystemTime::now(),
            vec![
                KeyValue::new("schedkit.key", key.to_string()),
                KeyValue::new("schedkit.chain", chain.to_string()),
                KeyValue::new("schedkit.outcome", event.to_string()),
            ],
        );
    }
}

/// The exporter alone, for a program that writes spans only through [`trigger`] (the
/// console): no `tracing` layer. Does nothing without an endpoint, or when set up already.
pub fn init_exporter() {
    if PROVIDER.get().is_none() {
        let _ = layer::<tracing_subscriber::Registry>();
    }
}

/// The trigger's span of the run `key` (trace of `root_key`), written now (`schedkit
/// fire`, a backfill): what its message carries as its `traceparent`, so the run's
/// deliveries hang under it. None without traces.
pub fn trigger(what: &str, root_key: &str, key: &str) -> Option<RemoteSpan> {
    let provider = PROVIDER.get()?;
    let tracer = provider.tracer("schedkit");
    let parent = context_of(run_span(root_key, key));
    let mut span = tracer
        .span_builder(what.to_string())
        .with_attributes(vec![KeyValue::new("schedkit.key", key.to_string())])
        .start_with_context(&tracer, &parent);
    let context = opentelemetry::trace::Span::span_context(&span).clone();
    opentelemetry::trace::Span::end(&mut span);
    Some(RemoteSpan {
        trace_id: context.trace_id().to_bytes(),
        span_id: context.span_id().to_bytes(),
        sampled: context.is_sampled(),
    })
}
