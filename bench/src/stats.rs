//! Medians and ranges of a few samples: what every row of the results shows.

/// The median of `v` (the mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The smallest and largest sample.
pub fn range(v: &[f64]) -> (f64, f64) {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// `median (min–max)`, or the one value when there is one sample (or all agree).
pub fn cell(v: &[f64], digits: usize) -> String {
    let (min, max) = range(v);
    let m = median(v);
    let text = |x: f64| format!("{x:.digits$}");
    if v.len() > 1 && text(min) != text(max) {
        format!("{} ({}–{})", text(m), text(min), text(max))
    } else {
        text(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_median_is_the_middle_sample_or_the_mean_of_the_middle_two() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn a_cell_shows_the_range_only_when_the_samples_differ() {
        assert_eq!(cell(&[1.0, 3.0, 2.0], 1), "2.0 (1.0–3.0)");
        assert_eq!(cell(&[2.0, 2.0], 2), "2.00");
        assert_eq!(cell(&[5.0], 0), "5");
    }
}
