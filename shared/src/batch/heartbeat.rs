//! Heartbeats of a running attempt: renew the lease, then the message's visibility.
//!
//! Both must stay ahead of their expiry: the lease so no other worker reclaims the run, the
//! visibility so SQS does not hand the message to another worker meanwhile (which would
//! only bounce as in-progress, but costs a receive and, on AWS, counts toward the queue's
//! `maxReceiveCount`).

use std::time::Duration;

use aws_sdk_sqs::Client;
use chrono::Utc;
use tokio::sync::watch;

use crate::store::{DynamoStore, TransitionError};

/// What one heartbeat loop needs.
pub(crate) struct Heartbeat {
    pub store: DynamoStore,
    pub sqs: Client,
    pub queue_url: String,
    pub receipt_handle: Option<String>,
    pub key: String,
    pub owner: String,
    pub every: Duration,
    pub lease: Duration,
    /// Set to `true` when the lease turns out to be lost.
    pub lost: watch::Sender<bool>,
}

impl Heartbeat {
    /// Runs until the lease is lost or the task is aborted (when the attempt ends).
    pub async fn run(self) {
        loop {
            tokio::time::sleep(self.every).await;
            match self
                .store
                .heartbeat(&self.key, &self.owner, Utc::now(), self.lease)
                .await
            {
                Ok(()) => self.extend_visibility().await,
                Err(TransitionError::LeaseLost { .. }) => {
                    tracing::warn!(key = self.key, "heartbeat refused: lease lost");
                    let _ = self.lost.send(true);
                    return;
                }
                Err(TransitionError::Store(e)) => {
                    // The lease may lapse if this persists; fencing keeps that safe.
                    tracing::warn!(key = self.key, error = %e, "heartbeat failed; will retry");
                }
            }
        }
    }

    async fn extend_visibility(&self) {
        let Some(receipt) = &self.receipt_handle else {
            return;
        };
        let secs = self.lease.as_secs_f64().ceil().max(1.0) as i32;
        if let Err(e) = self
            .sqs
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .visibility_timeout(secs)
            .send()
            .await
        {
            tracing::warn!(
                key = self.key,
                error = %crate::aws::describe(&e),
                "could not extend message visibility"
            );
        }
    }
}
