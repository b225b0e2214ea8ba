//! What the benchmark binaries share: counting requests on the wire ([`wire`]).

pub mod wire;
