//! The alarms of the accountant's findings: for every scheduled job and chain, one on its
//! `Missed` firings and one on its `Late` runs. Not held back by the failure storm (which
//! counts them instead): a run that never happened has no failure to group it with.

use super::resources::{JobAlarm, logical_id};
use crate::catalog::Catalog;

/// The scheduled jobs' and chains' names and owners: the ones the accountant expects.
fn scheduled(catalog: &Catalog) -> Vec<(&str, &str, bool)> {
    let jobs = catalog
        .jobs
        .values()
        .filter(|j| j.schedule.is_some() && j.spec.schedule.as_ref().is_some_and(|s| s.enabled))
        .map(|j| (j.name.as_str(), j.spec.owner.as_str(), false));
    let chains = catalog
        .chains
        .values()
        .filter(|c| c.schedule.is_some() && c.spec.schedule.as_ref().is_some_and(|s| s.enabled))
        .map(|c| (c.name.as_str(), c.spec.owner.as_str(), true));
    jobs.chain(chains).collect()
}

/// Writes the missed and late alarms of every scheduled job and chain.
pub(super) fn write(r: &mut String, catalog: &Catalog) {
    for (name, owner, chain) in scheduled(catalog) {
        let id = logical_id(name);
        let what = if chain { "chain" } else { "job" };
        let missed = format!(
            "A scheduled firing of {what} {name} has no run past its window and grace: the scheduler did not fire, or its message never reached a worker. `schedkit executions list --missed` lists it. Owner: {owner}."
        );
        JobAlarm {
            resource: format!("MissedAlarm{id}"),
            suffix: "missed",
            description: &missed,
            metric: "Missed",
            notify: true,
        }
        .write(r, name);
        let late = format!(
            "A run of {what} {name} is not DONE by its deadline (the catalog's `deadline`, else its retry policy's worst case). `schedkit status` lists it while it is late. Owner: {owner}."
        );
        JobAlarm {
            resource: format!("LateAlarm{id}"),
            suffix: "late",
            description: &late,
            metric: "Late",
            notify: true,
        }
        .write(r, name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_enabled_schedule_has_a_missed_and_a_late_alarm_and_nothing_else_does() {
        let catalog = Catalog::parse(
            r#"
[jobs.nightly]
owner = "data"
[jobs.nightly.schedule]
expression = "cron(0 2 * * ? *)"

[jobs.off]
owner = "data"
[jobs.off.schedule]
expression = "rate(1 hour)"
enabled = false

[jobs.adhoc]
owner = "data"
"#,
            "c.toml",
        )
        .unwrap();
        let mut r = String::new();
        write(&mut r, &catalog);
        let resources: Vec<&str> = r
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .collect();
        assert_eq!(
            resources,
            ["  MissedAlarmNightly:", "  LateAlarmNightly:"],
            "{r}"
        );
        assert!(r.contains("MetricName: Missed") && r.contains("MetricName: Late"));
        assert!(r.contains("schedkit-${Stage}-nightly-missed"));
    }
}
