//! One-time confirmations. Every confirmation page carries a fresh id, and acting consumes
//! it: a form sent again (a reload, Back and send, a second tab's copy) is refused instead
//! of firing a second run or rerunning a chain again. What an action did is kept under its
//! id, and the browser is sent to read it there (so reloading the result repeats nothing).

use std::collections::VecDeque;
use std::sync::Mutex;

/// Confirmations kept at most (the oldest is forgotten first: confirming again makes one).
const KEPT: usize = 1000;

/// What an action did, as its result page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// The command's sentence.
    pub text: String,
    /// Where to look at what changed.
    pub back: String,
}

#[derive(Debug, Default)]
struct Kept {
    issued: VecDeque<String>,
    done: VecDeque<(String, Done)>,
}

/// The confirmations this server issued and not yet used, and the results of those used.
#[derive(Debug, Default)]
pub struct Confirmations {
    kept: Mutex<Kept>,
}

impl Confirmations {
    /// A new confirmation's id.
    pub fn issue(&self) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut kept = self.kept.lock().expect("not poisoned");
        if kept.issued.len() >= KEPT {
            kept.issued.pop_front();
        }
        kept.issued.push_back(id.clone());
        id
    }

    /// Uses the confirmation `id`: true once for each id this server issued.
    pub fn take(&self, id: &str) -> bool {
        let mut kept = self.kept.lock().expect("not poisoned");
        match kept.issued.iter().position(|i| i == id) {
            Some(at) => {
                kept.issued.remove(at);
                true
            }
            None => false,
        }
    }

    /// Keeps what the action confirmed as `id` did.
    pub fn keep(&self, id: &str, done: Done) {
        let mut kept = self.kept.lock().expect("not poisoned");
        if kept.done.len() >= KEPT {
            kept.done.pop_front();
        }
        kept.done.push_back((id.to_string(), done));
    }

    /// What the action confirmed as `id` did, if this server remembers it.
    pub fn done(&self, id: &str) -> Option<Done> {
        let kept = self.kept.lock().expect("not poisoned");
        kept.done
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, d)| d.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirmation_is_used_once() {
        let c = Confirmations::default();
        let id = c.issue();
        assert!(c.take(&id));
        assert!(!c.take(&id), "sent again");
        assert!(!c.take("never-issued"));
        assert!(!c.take(""));
        let (a, b) = (c.issue(), c.issue());
        assert_ne!(a, b);
        assert!(c.take(&b) && c.take(&a), "in any order");
    }

    #[test]
    fn results_are_kept_under_their_confirmation_and_the_oldest_forgotten() {
        let c = Confirmations::default();
        let first = c.issue();
        for _ in 0..KEPT {
            c.issue();
        }
        assert!(!c.take(&first), "forgotten past {KEPT}");
        let done = Done {
            text: "redrove 2".into(),
            back: "/dlq".into(),
        };
        c.keep("x", done.clone());
        assert_eq!(c.done("x"), Some(done));
        assert_eq!(c.done("y"), None);
    }
}
