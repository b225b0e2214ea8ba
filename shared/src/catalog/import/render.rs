//! A parsed line as EventBridge's `cron()`, and the import as catalog TOML.

use super::field::{self, Field};
use super::imported::Imported;
use super::line::Entry;

/// EventBridge's six-field `cron()` that fires exactly when cron ran the line, or why
/// there is none.
pub fn expression(entry: &Entry) -> Result<String, String> {
    let [minute, hour, dom, month, dow] = &entry.fields;
    let dom_all = dom.is_full(Field::DayOfMonth);
    let dow_all = dow.is_full(Field::DayOfWeek);
    // crontab(5): with both day fields restricted and neither starting with `*`, a day
    // matching either runs the line; otherwise a day must match both.
    let either = !dom.starts_with_star && !dow.starts_with_star;
    let (dom_text, dow_text) = match (dom_all, dow_all) {
        (true, true) => ("*".to_string(), "?".to_string()),
        // OR with a field that matches every day: every day.
        (true, false) | (false, true) if either => ("*".into(), "?".into()),
        // AND with a field that matches every day: the other decides.
        (true, false) => ("?".into(), field::render(Field::DayOfWeek, dow)),
        (false, true) => (field::render(Field::DayOfMonth, dom), "?".into()),
        (false, false) => {
            let rule = if either {
                "cron runs it on days matching either"
            } else {
                "cron runs it on days matching both"
            };
            return Err(format!(
                "both day of month and day of week are restricted: {rule}, and EventBridge's cron() takes one day field; write it as two jobs, one per day field"
            ));
        }
    };
    let text = format!(
        "cron({} {} {dom_text} {} {dow_text} *)",
        field::render(Field::Minute, minute),
        field::render(Field::Hour, hour),
        field::render(Field::Month, month),
    );
    // Checked by schedkit's own parser: what the import writes must load.
    text.parse::<crate::schedule::ScheduleExpression>()
        .map_err(|e| format!("its translation `{text}` is not a valid schedule: {e}"))?;
    if text.len() > 256 {
        return Err(format!(
            "its translation is {} characters, EventBridge Scheduler takes 256",
            text.len()
        ));
    }
    Ok(text)
}

/// Catalog TOML for the imported jobs, the refused lines and notes as comments.
pub fn catalog(imported: &Imported, owner: &str) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = String::from(
        "# Imported from a crontab by `schedkit catalog import`: each job runs its line's command\n\
         # on a polling host (runs_on = \"host\"), at the times cron ran it, in the zone it ran in.\n",
    );
    for job in &imported.jobs {
        out.push('\n');
        if let Some(comment) = &job.comment {
            out.push_str(&format!("# {comment}\n"));
        }
        out.push_str(&format!("[jobs.{}]\n", job.name));
        out.push_str(&format!(
            "description = {}\n",
            q(&format!("crontab line {}: {}", job.line, job.source))
        ));
        out.push_str(&format!("owner = {}\n", q(owner)));
        out.push_str("runs_on = \"host\"\n");
        // Cron ran it once, whatever its exit: a retry would repeat what it did (raise it
        // for a job whose failures a retry may fix).
        out.push_str("retry = { max_attempts = 1 }\n");
        out.push_str(&format!(
            "schedule = {{ expression = {}, timezone = {} }}\n",
            q(&job.expression),
            q(&job.timezone)
        ));
        out.push_str(&format!("[jobs.{}.command]\n", job.name));
        out.push_str(&format!("run = {}\n", q(&job.command)));
        if let Some(shell) = &job.shell {
            out.push_str(&format!("shell = {}\n", q(shell)));
        }
        if let Some(stdin) = &job.stdin {
            out.push_str(&format!("stdin = {}\n", q(stdin)));
        }
        if let Some(user) = &job.user {
            out.push_str(&format!(
                "# cron ran it as `{user}`; it runs as the polling host's user\n"
            ));
        }
        if !job.env.is_empty() {
            let pairs: Vec<String> = job
                .env
                .iter()
                .map(|(k, v)| format!("{k} = {}", q(v)))
                .collect();
            out.push_str(&format!("env = {{ {} }}\n", pairs.join(", ")));
        }
    }
    if !imported.refused.is_empty() || !imported.notes.is_empty() {
        out.push_str("\n# Not imported:\n");
        for r in &imported.refused {
            out.push_str(&format!(
                "#   line {}: {}\n#     {}\n",
                r.line, r.source, r.reason
            ));
        }
        for n in &imported.notes {
            out.push_str(&format!("#   {n}\n"));
        }
    }
    out
}
