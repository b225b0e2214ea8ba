//! `--page` and `--per-page`: which page of the catalog's jobs a listing reads (`jobs`,
//! `status`). A page costs its own requests, whatever the catalog's size.

use clap::Args;
use schedkit::ops::paging::{Page, Paged};

#[derive(Debug, Clone, Args)]
pub struct PageArgs {
    /// Which page of the catalog's jobs (by name), from 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub page: u32,
    /// Jobs a page holds.
    #[arg(long, default_value_t = Page::DEFAULT_SIZE as u32, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub per_page: u32,
}

impl PageArgs {
    pub fn page(&self) -> Page {
        Page {
            number: self.page as usize,
            size: self.per_page as usize,
        }
    }
}

/// The line under a table of one page of many (`jobs 1-50 of 1000; --page 2 for the next`);
/// None when the catalog fits on one page.
pub fn footer(p: &Paged, command: &str) -> Option<String> {
    if p.pages <= 1 {
        return None;
    }
    let first = (p.number - 1) * p.size + 1;
    let last = (p.number * p.size).min(p.total);
    let next = if p.has_next() {
        format!(
            "; `schedkit {command} --page {}` for the next",
            p.number + 1
        )
    } else {
        String::new()
    };
    Some(if first > p.total {
        format!(
            "jobs: page {} of {} is past the end ({} jobs)",
            p.number, p.pages, p.total
        )
    } else {
        format!(
            "jobs {first}-{last} of {} (page {} of {}){next}",
            p.total, p.number, p.pages
        )
    })
}
