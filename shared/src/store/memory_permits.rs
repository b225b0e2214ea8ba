//! Permits in memory, as [`DynamoStore::take_permit`](super::DynamoStore::take_permit) takes
//! them: the same steps (a try; a look at each holder whose hint passed; a second try that
//! drops those gone), each one request, decided by the same functions of `permits`.

use super::StoreError;
use super::memory::{MemoryState, MemoryStore};
use super::permits::{
    GateItem, Permit, PermitRequest, entry_of, holder_gone, looks_further, next_start, rate_allows,
    room_for, to_look_at,
};

/// Tries before a run is told the gate is full, as DynamoDB's implementation does.
const TRIES: usize = 3;

/// The write that enters the gate, if the item is still as the taker saw it: the entries
/// `dropped` still name the claims read, and there is room.
fn enter(
    state: &mut MemoryState,
    req: &PermitRequest<'_>,
    dropped: &[(String, String)],
) -> Result<(), GateItem> {
    let item = state.gates.entry(req.item.to_string()).or_default();
    let now = req.now.timestamp_millis();
    let dropped_still = dropped
        .iter()
        .all(|(k, owner)| item.holders.get(k).is_some_and(|h| &h.owner == owner));
    let counted_ok = req.concurrency.is_none()
        || (item.counted || item.holders.is_empty()) && room_for(item, req, dropped);
    if !dropped_still || !counted_ok || !rate_allows(item, now) {
        return Err(item.clone());
    }
    for (k, _) in dropped {
        item.holders.remove(k);
    }
    if let Some(limit) = req.concurrency {
        item.counted = true;
        item.holders.insert(req.key.to_string(), entry_of(req));
        if item.holders.len() > limit as usize {
            let line = format!(
                "{}: {} holders under a limit of {limit}",
                req.item,
                item.holders.len()
            );
            state.permit_breaches.push(line);
        }
    }
    if let Some(next) = next_start(req) {
        state
            .gates
            .get_mut(req.item)
            .expect("entered above")
            .next_start_ms = Some(next);
    }
    Ok(())
}

impl MemoryStore {
    /// Takes a permit of a gate.
    pub(super) async fn take_permit(&self, req: &PermitRequest<'_>) -> Result<Permit, StoreError> {
        let mut dropped: Vec<(String, String)> = Vec::new();
        let mut seen = GateItem::default();
        for _ in 0..TRIES {
            let entered = self
                .request("take_permit", req.item, |state| enter(state, req, &dropped))
                .await?;
            seen = match entered {
                Ok(()) => return Ok(Permit::Taken),
                Err(item) => item,
            };
            if !rate_allows(&seen, req.now.timestamp_millis()) {
                break;
            }
            dropped.clear();
            for (key, owner) in to_look_at(&seen, req) {
                if !looks_further(&seen, req, &dropped) {
                    break;
                }
                let record = self
                    .request("take_permit.holder", &key, |state| {
                        state.records.get(&key).cloned()
                    })
                    .await?;
                if holder_gone(record.as_ref(), &owner, req.now, req.skew) {
                    dropped.push((key, owner));
                }
            }
            if !room_for(&seen, req, &dropped) {
                break;
            }
        }
        Ok(match rate_allows(&seen, req.now.timestamp_millis()) {
            false => Permit::TooSoon {
                next_start_ms: seen.next_start_ms.unwrap_or_default(),
            },
            true => Permit::Full {
                holders: seen.holders.keys().cloned().collect(),
            },
        })
    }

    /// Gives a permit back, if the entry is still the claim's.
    pub(super) async fn release_permit(
        &self,
        item: &str,
        key: &str,
        owner: &str,
    ) -> Result<(), StoreError> {
        self.request("release_permit", item, |state| {
            if let Some(gate) = state.gates.get_mut(item)
                && gate.holders.get(key).is_some_and(|h| h.owner == owner)
            {
                gate.holders.remove(key);
            }
        })
        .await
    }
}
