//! A team's catalog grown past the demo's: `jobs` scheduled jobs sharing the example
//! worker's few implementations (`handler`), their firings spread over each hour, and
//! `chains` scheduled chains of three stages; one job made to fail (its partner account is
//! blocked, one attempt) so its failure can be found by the stage's alarm. What the scale
//! test deploys and runs, and what the benchmark's "A catalog of N jobs" measures.

use std::fmt::Write;

use chrono::{DateTime, Utc};

/// The size of a grown catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grown {
    /// Scheduled jobs (a chains' step job comes on top when there are chains).
    pub jobs: usize,
    /// Scheduled chains.
    pub chains: usize,
}

/// Every tenth job runs every 20 minutes (three firings an hour); the others hourly. A
/// cron, not a rate: a rate's start is sent as its next run on its phase (AWS refuses a
/// past start), so a rate synced now would not fire in the hour behind us that the test
/// fast-forwards.
const EVERY_20_MINUTES: usize = 10;

impl Grown {
    /// The `i`th job's name.
    pub fn job(i: usize) -> String {
        format!("job-{i:04}")
    }

    /// The `c`th chain's name.
    pub fn chain(c: usize) -> String {
        format!("chain-{c:03}")
    }

    /// The job made to fail: every run FAILED after its one attempt.
    pub fn failing_job(&self) -> String {
        Grown::job(7.min(self.jobs.saturating_sub(1)))
    }

    /// The catalog's TOML, its schedules in group `group` when given.
    pub fn toml(&self, group: Option<&str>) -> String {
        let mut t = String::new();
        if let Some(g) = group {
            writeln!(t, "[settings]\nschedule_group = \"{g}\"\n").unwrap();
        }
        let failing = self.failing_job();
        for i in 0..self.jobs {
            let name = Grown::job(i);
            let (handler, payload) = if name == failing {
                ("partner-export", "{ account = \"acct-blocked\" }")
            } else if i % 2 == 0 {
                ("flaky-sync", "{ fail_times = 0 }")
            } else {
                ("long-report", "{ seconds = 0 }")
            };
            writeln!(
                t,
                "[jobs.{name}]\nowner = \"team-{}\"\ndescription = \"Generated job {i}.\"\nhandler = \"{handler}\"\npayload = {payload}",
                i % 9
            )
            .unwrap();
            if name == failing {
                // A job that pauses, as teams' catalogs have (the stage's worker then holds
                // the grant to pause); after more failures than a test makes.
                writeln!(t, "pause_after_failures = 1000").unwrap();
                // And reads a secret, as jobs do (the worker's grant names it).
                writeln!(
                    t,
                    "secrets = {{ PARTNER_KEY = \"secretsmanager:grown/partner\" }}"
                )
                .unwrap();
                writeln!(t, "[jobs.{name}.retry]\nmax_attempts = 1").unwrap();
            }
            let expression = if i % EVERY_20_MINUTES == 3 {
                format!("cron({}/20 * * * ? *)\"", i % 20)
            } else {
                format!("cron({} * * * ? *)\"", i % 60)
            };
            let zone = if i % 3 == 0 { "Europe/Berlin" } else { "UTC" };
            writeln!(
                t,
                "[jobs.{name}.schedule]\nexpression = \"{expression}\ntimezone = \"{zone}\"\n"
            )
            .unwrap();
        }
        if self.chains > 0 {
            t.push_str("[jobs.chain-step]\nowner = \"data-team\"\nhandler = \"flaky-sync\"\npayload = { fail_times = 0 }\n\n");
        }
        for c in 0..self.chains {
            let name = Grown::chain(c);
            writeln!(
                t,
                "[chains.{name}]\nowner = \"team-{}\"\nstages = [\"extract\", [\"left\", \"right\"], \"load\"]",
                c % 9
            )
            .unwrap();
            // A step runs with its own payload (and the chain's), not its job's.
            for step in ["extract", "left", "right", "load"] {
                writeln!(
                    t,
                    "[chains.{name}.steps.{step}]\njob = \"chain-step\"\npayload = {{ fail_times = 0 }}"
                )
                .unwrap();
            }
            writeln!(
                t,
                "[chains.{name}.schedule]\nexpression = \"cron({} * * * ? *)\"\n",
                (c * 7 + 3) % 60
            )
            .unwrap();
        }
        t
    }

    /// The firings of the `i`th job in a whole hour: one, three for every 20 minutes.
    pub fn firings_per_hour(i: usize) -> usize {
        if i % EVERY_20_MINUTES == 3 { 3 } else { 1 }
    }

    /// Firings of every job and chain in `hours` whole hours.
    pub fn firings(&self, hours: usize) -> usize {
        hours * ((0..self.jobs).map(Grown::firings_per_hour).sum::<usize>() + self.chains)
    }
}

/// The whole hour before `now`: `[now - 1h, now)` truncated to the hour.
pub fn last_whole_hour(now: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    use chrono::DurationRound;
    let to = now
        .duration_trunc(chrono::TimeDelta::hours(1))
        .expect("an hour");
    (to - chrono::TimeDelta::hours(1), to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use schedkit::catalog::Catalog;

    #[test]
    fn a_grown_catalog_is_valid_and_expects_what_it_says() {
        let g = Grown {
            jobs: 40,
            chains: 3,
        };
        let catalog = Catalog::parse(&g.toml(Some("grown")), "grown.toml").unwrap();
        assert_eq!(catalog.jobs.len(), 41);
        assert_eq!(catalog.chains.len(), 3);
        assert_eq!(
            catalog.job(&g.failing_job()).unwrap().handler(),
            "partner-export"
        );
        let (from, to) = last_whole_hour(Utc::now());
        let expected = schedkit::accounting::expected(
            &catalog,
            from,
            to,
            std::time::Duration::ZERO,
            |_, _| false,
        );
        assert_eq!(expected.len(), g.firings(1));
    }
}
