//! Selective redrive: `letters` dead letters of `record-invoice` among a tenth as many of
//! another job, sent back to the jobs queue with the others left in the DLQ; schedkit's
//! `dlq redrive --job record-invoice` (`schedkit::ops::dlq::redrive_selected`) against the
//! loop a script would write, and schedkit's redrive was before: receive, then for each
//! selected letter send it and delete it. Both on the same LocalStack, alternating; each
//! run checked (every selected letter in the jobs queue once, every other still in the DLQ).

use std::collections::BTreeMap;
use std::collections::HashSet;
use std::time::Instant;

use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, MessageSystemAttributeName, QueueAttributeName,
};
use schedkit::Envelope;
use schedkit::aws::SdkConfig;
use schedkit::ops::dlq::{Destinations, Selection, redrive_selected};
use schedkit_testkit::Stack;

use crate::throughput::invoice;
use crate::wire::WireCounter;

/// Who redrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Redriver {
    Schedkit,
    OneByOne,
}

impl Redriver {
    pub fn label(self) -> &'static str {
        match self {
            Redriver::Schedkit => "schedkit `dlq redrive --job`",
            Redriver::OneByOne => "one-by-one loop (send, delete)",
        }
    }
}

/// Per side: letters per second, and SQS requests per letter (counted on the wire).
#[derive(Debug, Clone, Default)]
pub struct Redrives {
    pub letters_per_second: BTreeMap<Redriver, Vec<f64>>,
    pub requests_per_letter: BTreeMap<Redriver, Vec<f64>>,
}

const JOB: &str = "record-invoice";

async fn fill_dlq(stack: &Stack, letters: usize) -> anyhow::Result<()> {
    let at = "2026-11-01T02:00:00Z".parse().expect("an instant");
    let others = letters / 10;
    let bodies: Vec<String> = (0..letters)
        .map(|t| invoice(t, 0.0))
        .chain((0..others).map(|_| Envelope::new("long-report", at).to_json()))
        .collect();
    crate::seed::dead_letters(stack, bodies.into_iter().map(|b| (b, None))).await
}

async fn visible(stack: &Stack, url: &str) -> anyhow::Result<usize> {
    let out = stack
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?;
    Ok(out
        .attributes
        .unwrap_or_default()
        .values()
        .filter_map(|v| v.parse::<usize>().ok())
        .sum())
}

/// The peer: what a script does, one letter at a time.
async fn one_by_one(sqs: &aws_sdk_sqs::Client, stack: &Stack) -> anyhow::Result<usize> {
    let (mut moved, mut held, mut seen) = (0, Vec::new(), HashSet::new());
    loop {
        let batch = sqs
            .receive_message()
            .queue_url(&stack.dlq_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .visibility_timeout(60)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await?
            .messages
            .unwrap_or_default();
        let mut new = false;
        for m in batch {
            let id = m.message_id.clone().unwrap_or_default();
            let receipt = m.receipt_handle.clone().unwrap_or_default();
            if !seen.insert(id) {
                held.push(receipt);
                continue;
            }
            new = true;
            let body = m.body.unwrap_or_default();
            let selected = Envelope::parse(&body).is_ok_and(|e| e.job == JOB);
            if !selected {
                held.push(receipt);
                continue;
            }
            sqs.send_message()
                .queue_url(&stack.queue_url)
                .message_body(body)
                .send()
                .await?;
            sqs.delete_message()
                .queue_url(&stack.dlq_url)
                .receipt_handle(receipt)
                .send()
                .await?;
            moved += 1;
        }
        if !new {
            break;
        }
    }
    for chunk in held.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, r)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(r)
                    .visibility_timeout(0)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        sqs.change_message_visibility_batch()
            .queue_url(&stack.dlq_url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    Ok(moved)
}

/// One redrive of `letters` (with a tenth as many others) by `side`, checked; its time.
async fn redrive_once(
    sdk: &SdkConfig,
    stack: &Stack,
    side: Redriver,
    letters: usize,
) -> anyhow::Result<std::time::Duration> {
    stack.reset().await?;
    fill_dlq(stack, letters).await?;
    let started = Instant::now();
    let moved = match side {
        Redriver::Schedkit => {
            let selection = Selection {
                jobs: vec![JOB.into()],
                ..Selection::default()
            };
            redrive_selected(
                sdk,
                &stack.dlq_url,
                &Destinations::one(&stack.queue_url),
                &selection,
                |_| {},
            )
            .await?
            .done
        }
        Redriver::OneByOne => one_by_one(&aws_sdk_sqs::Client::new(sdk), stack).await?,
    };
    let took = started.elapsed();
    let (queued, left) = (
        visible(stack, &stack.queue_url).await?,
        visible(stack, &stack.dlq_url).await?,
    );
    anyhow::ensure!(
        moved == letters && queued == letters && left == letters / 10,
        "{}: moved {moved} of {letters}; {queued} in the jobs queue, {left} left in the DLQ (expected {})",
        side.label(),
        letters / 10
    );
    Ok(took)
}

/// `rounds` redrives of each side.
pub async fn run(
    sdk: &SdkConfig,
    stack: &Stack,
    wire: &WireCounter,
    letters: usize,
    rounds: usize,
) -> anyhow::Result<Redrives> {
    // Timed against LocalStack directly (a forwarder's CPU would compete with LocalStack's,
    // which costs the side with more requests in flight more); then one smaller run of
    // each through the counting forwarder, for the requests per letter.
    let counted = sdk.to_builder().endpoint_url(wire.endpoint()).build();
    println!(
        "redrive: {letters} letters of {JOB} among {} of another job, {rounds} rounds",
        letters / 10
    );
    let mut out = Redrives::default();
    for round in 0..rounds {
        let order = if round.is_multiple_of(2) {
            [Redriver::Schedkit, Redriver::OneByOne]
        } else {
            [Redriver::OneByOne, Redriver::Schedkit]
        };
        for side in order {
            let took = redrive_once(sdk, stack, side, letters).await?;
            let rate = letters as f64 / took.as_secs_f64();
            println!(
                "  round {}: {:<34} {:>8.0} letters/s ({:.2} s)",
                round + 1,
                side.label(),
                rate,
                took.as_secs_f64()
            );
            out.letters_per_second.entry(side).or_default().push(rate);
        }
    }
    let few = (letters / 4).max(10);
    for side in [Redriver::Schedkit, Redriver::OneByOne] {
        wire.take();
        redrive_once(&counted, stack, side, few).await?;
        let requests: u64 = wire.take().values().sum();
        out.requests_per_letter
            .entry(side)
            .or_default()
            .push(requests as f64 / few as f64);
    }
    Ok(out)
}
