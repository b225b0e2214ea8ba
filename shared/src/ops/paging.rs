//! A page of a list the catalog orders (its jobs, by name): what `schedkit jobs`, `status`
//! and the web page read a request or two for each, so a catalog of a thousand jobs costs
//! them one page's requests, not a thousand.

use std::ops::Range;

use serde::Serialize;

/// Which page, and how long pages are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// From 1.
    pub number: usize,
    /// Items a page holds (at least 1).
    pub size: usize,
}

impl Page {
    /// Items a page holds unless said otherwise.
    pub const DEFAULT_SIZE: usize = 50;

    /// The first page of the default size.
    pub fn first() -> Page {
        Page {
            number: 1,
            size: Self::DEFAULT_SIZE,
        }
    }

    /// The indexes of this page's items among `total` (empty past the last page).
    pub fn range(&self, total: usize) -> Range<usize> {
        let size = self.size.max(1);
        let start = self
            .number
            .max(1)
            .saturating_sub(1)
            .saturating_mul(size)
            .min(total);
        start..(start.saturating_add(size)).min(total)
    }

    /// Where this page stands among `total` items.
    pub fn of(&self, total: usize) -> Paged {
        let size = self.size.max(1);
        Paged {
            number: self.number.max(1),
            size,
            total,
            pages: total.div_ceil(size).max(1),
        }
    }
}

/// Where a page stands: what a front end says under it ("1-50 of 1000").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Paged {
    /// This page, from 1.
    pub number: usize,
    /// Items a page holds.
    pub size: usize,
    /// Items in all.
    pub total: usize,
    /// Pages in all (at least 1).
    pub pages: usize,
}

impl Paged {
    /// Whether a later page has items.
    pub fn has_next(&self) -> bool {
        self.number < self.pages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_cut_the_list_in_order_and_past_the_end_is_empty() {
        let p = |number| Page { number, size: 50 };
        assert_eq!(p(1).range(1000), 0..50);
        assert_eq!(p(20).range(1000), 950..1000);
        assert_eq!(p(21).range(1000), 1000..1000);
        assert_eq!(p(1).range(4), 0..4);
        assert_eq!(p(0).range(4), 0..4, "page 0 is the first");
        assert_eq!(p(1).of(1000).pages, 20);
        assert!(p(19).of(1000).has_next() && !p(20).of(1000).has_next());
        assert_eq!(p(1).of(0).pages, 1);
    }
}
