//! A rate: starts per window.

use std::num::NonZeroU32;
use std::time::Duration;

/// Starts per window, as the catalog writes it (`20/minute`): kept as evenly spaced starts,
/// one every `per / starts` ([`Rate::spacing`], rounded up to whole milliseconds), so that
/// no window of length `per` holds more than `starts`, whichever window is looked at (a
/// bucket that let a burst through would allow twice as many in a window straddling two).
/// Each worker reads the spacing on its own clock: workers whose clocks differ by the skew
/// bound (500 ms by default) may start two runs that much closer than the spacing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Starts allowed in one window.
    pub starts: NonZeroU32,
    /// The window: a second, a minute or an hour.
    pub per: Duration,
}

impl std::str::FromStr for Rate {
    type Err = String;

    /// `<starts>/<second|minute|hour>`, as the catalog writes it (`20/minute`).
    fn from_str(text: &str) -> Result<Rate, String> {
        let refuse = || {
            format!(
                "`{text}` is not a rate: write `<starts>/<second|minute|hour>` with at least one start, e.g. `20/minute`"
            )
        };
        let (starts, per) = text.split_once('/').ok_or_else(refuse)?;
        let starts = starts
            .trim()
            .parse::<u32>()
            .ok()
            .and_then(NonZeroU32::new)
            .ok_or_else(refuse)?;
        let per = match per.trim() {
            "second" => Duration::from_secs(1),
            "minute" => Duration::from_secs(60),
            "hour" => Duration::from_secs(3600),
            _ => return Err(refuse()),
        };
        let rate = Rate { starts, per };
        if rate.spacing() < MIN_SPACING {
            return Err(format!(
                "`{text}` is faster than a limit can keep: at most 1000 starts a second (its starts are spaced in whole milliseconds)"
            ));
        }
        // Spaced in whole milliseconds, rounded up: refused where that would start more
        // than a tenth less often than it says (`999/second` would be kept as 500).
        let kept = rate.kept_spacing();
        if kept.saturating_sub(rate.spacing()) * 10 > rate.spacing() {
            let per_second = 1000 / kept.as_millis();
            return Err(format!(
                "`{text}` cannot be kept: its starts are spaced in whole milliseconds, so it would start {per_second} a second; write a rate whose spacing is whole milliseconds (`{per_second}/second`, `1000/second`) or at most 100 a second"
            ));
        }
        Ok(rate)
    }
}

/// The least spacing a rate may ask: the store keeps its next start in whole milliseconds
/// (a spacing is rounded up to the next one: `600/second` starts one every 2 ms, that is
/// 500 a second), so a faster rate could not be kept.
pub const MIN_SPACING: Duration = Duration::from_millis(1);

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let per = match self.per.as_secs() {
            1 => "second",
            60 => "minute",
            _ => "hour",
        };
        write!(f, "{}/{per}", self.starts)
    }
}

impl Rate {
    /// The least time between two starts.
    pub fn spacing(self) -> Duration {
        self.per / self.starts.get()
    }

    /// The spacing the gate keeps: [`Rate::spacing`] rounded up to whole milliseconds (the
    /// gate's next start is epoch milliseconds; rounded down, `3/second` would let four
    /// start within 999 ms).
    pub fn kept_spacing(self) -> Duration {
        let ms = self.spacing().as_nanos().div_ceil(1_000_000);
        Duration::from_millis(u64::try_from(ms).unwrap_or(u64::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print_as_written() {
        for text in ["20/minute", "1/second", "500/hour"] {
            assert_eq!(text.parse::<Rate>().unwrap().to_string(), text);
        }
        for bad in [
            "0/minute",
            "20/fortnight",
            "1.5/second",
            "minute",
            "-3/hour",
            "/minute",
            // Faster than the store can space (its times are whole milliseconds).
            "1001/second",
            "3600001/hour",
        ] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
        assert!("1000/second".parse::<Rate>().is_ok());
        assert!("500/second".parse::<Rate>().is_ok());
        assert!("100/second".parse::<Rate>().is_ok());
        assert!("3/second".parse::<Rate>().is_ok());
        // Kept in whole milliseconds, it would start far less often than it says.
        let refused = "999/second".parse::<Rate>().unwrap_err();
        assert!(refused.contains("would start 500 a second"), "{refused}");
        assert!("600/second".parse::<Rate>().is_err());
        assert!(
            "5000/second"
                .parse::<Rate>()
                .unwrap_err()
                .contains("at most 1000 starts a second")
        );
    }

    #[test]
    fn a_rate_spaces_its_starts_evenly_over_its_window() {
        let at = |t: &str| t.parse::<Rate>().unwrap().spacing();
        assert_eq!(at("30/minute"), Duration::from_secs(2));
        assert_eq!(at("4/second"), Duration::from_millis(250));
        assert_eq!(at("7/hour"), Duration::from_secs(3600) / 7);
    }
}
