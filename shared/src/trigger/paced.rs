//! Many Scheduler calls at the Scheduler's pace: a sync of a thousand schedules makes a
//! thousand reads and, the first time, a thousand writes. They go a few at once, their
//! starts spaced to a rate (EventBridge Scheduler's default quotas are 50 requests a second
//! per operation in some Regions, thousands in others: [`Pace::per_second`] defaults to the
//! lowest), and a call the service throttles waits (exponential backoff, full jitter) and
//! goes again, while the pace halves and then recovers. Written by hand: the SDK's retries
//! give up after three tries and know nothing of the other calls in flight.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use rand::Rng;
use tokio::time::Instant;

/// How fast, and how many at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Calls started per second at most.
    pub per_second: f64,
    /// Calls in flight at most.
    pub at_once: usize,
    /// Tries of one call the service throttles before its error is returned.
    pub tries: u32,
    /// The first wait after a throttled try; each further one doubles, up to
    /// [`Pace::max_backoff`] (a random part of it: full jitter).
    pub first_backoff: Duration,
    /// The longest wait between two tries.
    pub max_backoff: Duration,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            per_second: 50.0,
            at_once: 16,
            tries: 10,
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl Pace {
    /// This pace at `per_second` calls a second.
    pub fn at(per_second: f64) -> Pace {
        Pace {
            per_second: per_second.max(0.1),
            ..Pace::default()
        }
    }
}

/// The error codes AWS throttles with.
pub fn is_throttling(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "ThrottlingException"
                | "Throttling"
                | "TooManyRequestsException"
                | "RequestLimitExceeded"
                | "SlowDown"
        )
    )
}

/// Spaces the starts of calls: the next may start at `next`; the rate halves when a call is
/// throttled and climbs back by a twentieth of the pace per success.
struct Gate {
    max: f64,
    state: Mutex<(Instant, f64)>,
}

impl Gate {
    fn new(pace: &Pace) -> Gate {
        Gate {
            max: pace.per_second,
            state: Mutex::new((Instant::now(), pace.per_second)),
        }
    }

    /// Waits for this call's turn.
    async fn turn(&self) {
        let at = {
            let mut s = self.state.lock().expect("the gate's lock");
            let now = Instant::now();
            let at = s.0.max(now);
            s.0 = at + Duration::from_secs_f64(1.0 / s.1);
            at
        };
        tokio::time::sleep_until(at).await;
    }

    fn throttled(&self) {
        let mut s = self.state.lock().expect("the gate's lock");
        // Never slower than one a second, nor faster than asked.
        s.1 = (s.1 / 2.0).max(self.max.min(1.0));
    }

    fn succeeded(&self) {
        let mut s = self.state.lock().expect("the gate's lock");
        s.1 = (s.1 + self.max / 20.0).min(self.max);
    }
}

/// Runs `call` on every item at `pace`: at most `at_once` in flight, starts spaced, a
/// throttled try (`throttled` says which errors are) waited out and tried again;
/// `progress(done, total)` after each item ends. Every item is tried (one's failure stops
/// no other); the results come back in the items' order.
pub async fn each<'a, T, R, E, F, Fut>(
    items: &'a [T],
    pace: Pace,
    throttled: impl Fn(&E) -> bool,
    progress: &(dyn Fn(usize, usize) + Sync),
    call: F,
) -> Vec<Result<R, E>>
where
    F: Fn(&'a T) -> Fut,
    Fut: Future<Output = Result<R, E>>,
{
    let gate = Gate::new(&pace);
    let total = items.len();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let (gate, throttled, call, done) = (&gate, &throttled, &call, &done);
    let mut results: Vec<(usize, Result<R, E>)> = futures::stream::iter(items.iter().enumerate())
        .map(|(i, item)| async move {
            let mut backoff = pace.first_backoff;
            let mut tries = 0;
            let result = loop {
                gate.turn().await;
                tries += 1;
                match call(item).await {
                    Err(e) if throttled(&e) && tries < pace.tries => {
                        gate.throttled();
                        let wait = rand::rng().random_range(Duration::ZERO..=backoff);
                        tokio::time::sleep(wait).await;
                        backoff = (backoff * 2).min(pace.max_backoff);
                    }
                    Err(e) => break Err(e),
                    Ok(r) => {
                        gate.succeeded();
                        break Ok(r);
                    }
                }
            };
            let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            progress(n, total);
            (i, result)
        })
        .buffer_unordered(pace.at_once.max(1))
        .collect()
        .await;
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn calls_go_a_few_at_once_spaced_to_the_pace_in_the_items_order() {
        let in_flight = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let started = Mutex::new(Vec::new());
        let t0 = Instant::now();
        let items: Vec<u32> = (0..100).collect();
        let pace = Pace {
            per_second: 20.0,
            at_once: 4,
            ..Pace::default()
        };
        let out = each(
            &items,
            pace,
            |_: &()| false,
            &|_, _| {},
            |i| {
                let i = *i;
                let (in_flight, most, started) = (&in_flight, &most, &started);
                async move {
                    started.lock().unwrap().push(t0.elapsed());
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    Ok::<u32, ()>(i * 2)
                }
            },
        )
        .await;
        assert_eq!(out, (0..100).map(|i| Ok(i * 2)).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 4);
        // Four at once, each half a second: 8 a second, under the pace of 20.
        let took = t0.elapsed();
        assert!(took >= Duration::from_millis(12_500), "{took:?}");
        let fast = Pace {
            per_second: 20.0,
            at_once: 100,
            ..Pace::default()
        };
        let t1 = Instant::now();
        let quick = each(
            &items,
            fast,
            |_: &()| false,
            &|_, _| {},
            |_| async { Ok::<(), ()>(()) },
        )
        .await;
        assert_eq!(quick.len(), 100);
        // A hundred starts at 20 a second: the last one five seconds after the first.
        let took = t1.elapsed();
        assert!(
            took >= Duration::from_millis(4_900) && took < Duration::from_millis(5_100),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_pace_below_one_a_second_stays_below_it_after_a_throttle() {
        let thrown = std::sync::atomic::AtomicBool::new(false);
        let starts = Mutex::new(Vec::new());
        let t0 = Instant::now();
        let items: Vec<u32> = (0..4).collect();
        let pace = Pace {
            per_second: 0.5,
            at_once: 1,
            first_backoff: Duration::from_millis(1),
            ..Pace::default()
        };
        each(
            &items,
            pace,
            |e: &&str| *e == "throttled",
            &|_, _| {},
            |_| {
                let (thrown, starts) = (&thrown, &starts);
                async move {
                    starts.lock().unwrap().push(t0.elapsed());
                    if !thrown.swap(true, Ordering::SeqCst) {
                        return Err("throttled");
                    }
                    Ok(())
                }
            },
        )
        .await;
        let starts = starts.lock().unwrap();
        for pair in starts.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap >= Duration::from_millis(1_900), "{starts:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_call_waits_and_goes_again_and_an_error_is_returned_not_retried() {
        let tries = Mutex::new(std::collections::BTreeMap::<u32, u32>::new());
        let progress = Mutex::new(Vec::new());
        let items: Vec<u32> = (0..10).collect();
        let out = each(
            &items,
            Pace::at(100.0),
            |e: &&str| *e == "throttled",
            &|done, total| progress.lock().unwrap().push((done, total)),
            |i| {
                let i = *i;
                let tries = &tries;
                async move {
                    let n = {
                        let mut t = tries.lock().unwrap();
                        let n = t.entry(i).or_default();
                        *n += 1;
                        *n
                    };
                    match i {
                        // Throttled three times, then through.
                        3 if n <= 3 => Err("throttled"),
                        // A refusal: returned at once.
                        7 => Err("refused"),
                        // Throttled for good: given up after the pace's tries.
                        9 => Err("throttled"),
                        _ => Ok(i),
                    }
                }
            },
        )
        .await;
        let tries = tries.into_inner().unwrap();
        assert_eq!(out[3], Ok(3));
        assert_eq!(tries[&3], 4);
        assert_eq!(out[7], Err("refused"));
        assert_eq!(tries[&7], 1);
        assert_eq!(out[9], Err("throttled"));
        assert_eq!(tries[&9], Pace::default().tries);
        assert_eq!(out.iter().filter(|r| r.is_ok()).count(), 8);
        let progress = progress.into_inner().unwrap();
        assert_eq!(progress.len(), 10);
        assert_eq!(progress.last(), Some(&(10, 10)));
    }

    #[test]
    fn the_codes_aws_throttles_with_are_known() {
        assert!(is_throttling(Some("ThrottlingException")));
        assert!(!is_throttling(Some("ValidationException")));
        assert!(!is_throttling(None));
    }
}
