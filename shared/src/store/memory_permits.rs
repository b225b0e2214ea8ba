//! Permits in memory: the loop of [`take_permit`](super::permits::take_permit), written
//! once, over this store's two requests, each one atomic step; the write decided by the
//! very condition the DynamoDB store sends ([`enter_condition`]), evaluated over the gate
//! as DynamoDB holds it, and applied as its update says.

use std::collections::BTreeMap;

use super::gate_item::{GateItem, Holder, gate_as_item, gate_item};
use super::memory::{Change, MemoryState, MemoryStore};
use super::permits::{
    Entry, GateRequests, Permit, PermitRequest, enter_condition, entry_of, next_start,
    release_condition,
};
use super::{ExecutionRecord, StoreError};

/// The write that enters the gate, as [`DynamoStore`](super::DynamoStore)'s sends it: its
/// condition, then its update (the dropped entries removed, the run's own entry written,
/// the next start moved on).
fn enter(
    state: &mut MemoryState,
    req: &PermitRequest<'_>,
    how: &Entry,
) -> Result<Option<Holder>, GateItem> {
    let gate = state.gates.entry(req.item.to_string()).or_default();
    if !enter_condition(req, how).holds(Some(&gate_as_item(gate))) {
        return Err(gate.clone());
    }
    let replaced = gate.holders.get(req.key).cloned();
    if req.concurrency.is_some() {
        if how.fresh {
            gate.holders = BTreeMap::new();
        }
        for (key, _) in how.dropped.iter().filter(|(k, _)| k != req.key) {
            gate.holders.remove(key);
        }
        if how.waiting && !how.fresh {
            gate.waiters.remove(req.key);
        } else if !how.fresh {
            for (key, _) in &how.gone {
                gate.waiters.remove(key);
            }
        }
        gate.counted = true;
        gate.holders.insert(req.key.to_string(), entry_of(req));
    }
    let gate = state.gates.get_mut(req.item).expect("entered above");
    if let Some(next) = next_start(req) {
        gate.next_start_ms = Some(next);
    }
    let after = gate.clone();
    state.changes.push(Change::Gate {
        item: req.item.to_string(),
        after,
        limit: req.concurrency,
    });
    Ok(replaced)
}

impl GateRequests for MemoryStore {
    async fn holder(&self, key: &str) -> Result<Option<ExecutionRecord>, StoreError> {
        self.request("take_permit.holder", key, |state| {
            state.records.get(key).cloned()
        })
        .await
    }

    async fn enter_gate(
        &self,
        req: &PermitRequest<'_>,
        entry: &Entry,
    ) -> Result<Result<Option<Holder>, GateItem>, StoreError> {
        self.request("take_permit", req.item, |state| enter(state, req, entry))
            .await
    }
}

impl MemoryStore {
    /// Takes a permit of a gate.
    pub(super) async fn take_permit(&self, req: &PermitRequest<'_>) -> Result<Permit, StoreError> {
        super::permits::take_permit(self, req, None).await
    }

    /// Takes a permit from the gate as a read just found it (`seen`).
    pub(super) async fn take_permit_seen(
        &self,
        req: &PermitRequest<'_>,
        seen: GateItem,
    ) -> Result<Permit, StoreError> {
        super::permits::take_permit(self, req, Some(seen)).await
    }

    /// The gates `items` as they are now, each as DynamoDB's answer would decode it (a gate
    /// never written reads as an empty one): one request, as one `BatchGetItem` is.
    pub(super) async fn read_gates(
        &self,
        items: &[String],
    ) -> Result<BTreeMap<String, GateItem>, StoreError> {
        let first = items.first().map(String::as_str).unwrap_or_default();
        self.request("read_gates", first, |state| {
            items
                .iter()
                .map(|item| {
                    let gate = state
                        .gates
                        .get(item)
                        .map(|g| gate_item(&gate_as_item(g)))
                        .unwrap_or_default();
                    (item.clone(), gate)
                })
                .collect()
        })
        .await
    }

    /// Gives a permit back, if the entry is still the claim's; the gate as it left it.
    pub(super) async fn release_permit(
        &self,
        item: &str,
        key: &str,
        owner: &str,
    ) -> Result<GateItem, StoreError> {
        self.request("release_permit", item, |state| {
            let Some(gate) = state.gates.get_mut(item) else {
                return GateItem::default();
            };
            if release_condition(key, owner).holds(Some(&gate_as_item(gate))) {
                gate.holders.remove(key);
                // In the stream too, so that a reader of its images sees every holder
                // go (no limit: a give-back never adds one).
                state.changes.push(Change::Gate {
                    item: item.to_string(),
                    after: gate.clone(),
                    limit: None,
                });
            }
            gate.clone()
        })
        .await
    }
}
