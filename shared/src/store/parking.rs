//! The requests of a gate's line ([`super::waiters`]) to DynamoDB and to memory: parking a
//! run, handing a permit on, and passing one straight to a run that waits in the same
//! worker, each one conditional `UpdateItem` whose update and condition are written once
//! ([`park_write`], [`hand_on_write`], [`pass_write`]); the memory store decides by the
//! very condition DynamoDB is sent, over the gate as DynamoDB holds it.

use aws_sdk_dynamodb::types::ReturnValue;

use super::dynamo::{is_condition_failure, refused_item, unavailable};
use super::gate_item::{GateItem, gate_as_item, gate_item};
use super::memory::{Change, MemoryStore};
use super::waiters::{
    HandOn, LineWrite, ParkRequest, Parked, Pass, bumped, hand_on_write, park_refused, park_write,
    pass_write, reservation,
};
use super::{DynamoStore, StoreError};

/// Tries at parking before the run looks again on a timer: each refusal means the gate
/// changed between two looks.
const TRIES: usize = 3;

/// One conditional write, served by DynamoDB or by memory: the gate after it, or as it was
/// when refused. `limit`: the gate's concurrency, when the write adds a holder.
trait LineRequests {
    async fn write(
        &self,
        name: &'static str,
        limit: Option<u32>,
        item: &str,
        write: LineWrite,
        apply: impl Fn(&mut GateItem) + Send,
    ) -> Result<Result<GateItem, GateItem>, StoreError>;
}

/// Parks the run in the gate's line ([`park_write`]), creating the line if the gate has
/// none yet; `map`: whether it had one when the run was refused. A full line gives the
/// place of the waiter that comes last up to a run that comes before it ([`bumped`]).
async fn park(
    store: &impl LineRequests,
    req: &ParkRequest<'_>,
    mut map: bool,
) -> Result<Parked, StoreError> {
    let mut bump: Option<(String, String)> = None;
    for _ in 0..TRIES {
        let write = park_write(req, map, bump.as_ref());
        let out = bump.as_ref().map(|(key, _)| key.clone());
        let apply = |gate: &mut GateItem| {
            gate.has_waiters = true;
            if let Some(out) = &out {
                gate.waiters.remove(out);
            }
            gate.waiters.insert(req.key.to_string(), req.waiter.clone());
        };
        match store.write("park", None, req.item, write, apply).await? {
            Ok(after) => return Ok(Parked::Waiting(after)),
            Err(seen) => match park_refused(req, &seen) {
                Some(Parked::Crowded) => {
                    bump = bumped(&seen, req.key, &req.waiter, req.now_ms);
                    if bump.is_none() {
                        return Ok(Parked::Crowded);
                    }
                    map = seen.has_waiters;
                }
                Some(found) => return Ok(found),
                None => {
                    bump = None;
                    map = seen.has_waiters;
                }
            },
        }
    }
    Ok(Parked::Crowded)
}

/// Hands a permit on ([`hand_on_write`]): the gate after (the waiter holds it now), or as
/// it was when refused.
async fn hand_on(
    store: &impl LineRequests,
    h: &HandOn<'_>,
) -> Result<Result<GateItem, GateItem>, StoreError> {
    let write = hand_on_write(h);
    let held = reservation(h);
    let apply = |gate: &mut GateItem| {
        gate.waiters.remove(h.key);
        gate.holders.insert(h.key.to_string(), held.clone());
        gate.served = h.served.clone();
    };
    store
        .write("hand_on", Some(h.limit), h.item, write, apply)
        .await
}

/// Passes a permit ([`pass_write`]): the gate after, or as it was when refused.
async fn pass(
    store: &impl LineRequests,
    p: &Pass<'_>,
) -> Result<Result<GateItem, GateItem>, StoreError> {
    let apply = |gate: &mut GateItem| {
        gate.holders.remove(p.from.0);
        gate.holders.insert(p.to.0.to_string(), p.to.1.clone());
    };
    store
        .write("pass_permit", Some(p.limit), p.item, pass_write(p), apply)
        .await
}

impl LineRequests for DynamoStore {
    async fn write(
        &self,
        _name: &'static str,
        _limit: Option<u32>,
        item: &str,
        write: LineWrite,
        _apply: impl Fn(&mut GateItem) + Send,
    ) -> Result<Result<GateItem, GateItem>, StoreError> {
        let mut request = self
            .update(item, write.update, write.condition)
            .return_values(ReturnValue::AllNew);
        for (name, value) in write.values {
            request = request.expression_attribute_values(name, value);
        }
        let sent = request.send();
        match self.timed(sent).await? {
            Ok(out) => Ok(Ok(out.attributes().map(gate_item).unwrap_or_default())),
            Err(e) if is_condition_failure(&e) => {
                let seen = refused_item(&e).unwrap_or_default();
                Ok(Err(gate_item(&seen)))
            }
            Err(e) => Err(unavailable(e)),
        }
    }
}

impl LineRequests for MemoryStore {
    async fn write(
        &self,
        name: &'static str,
        limit: Option<u32>,
        item: &str,
        write: LineWrite,
        apply: impl Fn(&mut GateItem) + Send,
    ) -> Result<Result<GateItem, GateItem>, StoreError> {
        self.request(name, item, |state| {
            let Some(gate) = state.gates.get_mut(item) else {
                return Err(GateItem::default());
            };
            if !write.condition.holds(Some(&gate_as_item(gate))) {
                return Err(gate.clone());
            }
            apply(gate);
            let after = gate.clone();
            state.changes.push(Change::Gate {
                item: item.to_string(),
                after: after.clone(),
                limit,
            });
            Ok(after)
        })
        .await
    }
}

impl DynamoStore {
    /// Parks a run in a gate's line (see [`super::waiters`]).
    pub async fn park(&self, req: &ParkRequest<'_>, map: bool) -> Result<Parked, StoreError> {
        park(self, req, map).await
    }

    /// Hands a freed permit on to a waiter (see [`super::waiters`]).
    pub async fn hand_on(&self, h: &HandOn<'_>) -> Result<Result<GateItem, GateItem>, StoreError> {
        hand_on(self, h).await
    }

    /// Passes a permit to a run waiting in the same worker ([`Pass`]).
    pub async fn pass_permit(
        &self,
        p: &Pass<'_>,
    ) -> Result<Result<GateItem, GateItem>, StoreError> {
        pass(self, p).await
    }
}

impl MemoryStore {
    /// Parks a run in a gate's line.
    pub(super) async fn park(
        &self,
        req: &ParkRequest<'_>,
        map: bool,
    ) -> Result<Parked, StoreError> {
        park(self, req, map).await
    }

    /// Hands a freed permit on to a waiter.
    pub(super) async fn hand_on(
        &self,
        h: &HandOn<'_>,
    ) -> Result<Result<GateItem, GateItem>, StoreError> {
        hand_on(self, h).await
    }

    /// Passes a permit to a run waiting in the same worker.
    pub(super) async fn pass_permit(
        &self,
        p: &Pass<'_>,
    ) -> Result<Result<GateItem, GateItem>, StoreError> {
        pass(self, p).await
    }
}
