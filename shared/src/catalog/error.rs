//! What is wrong with a catalog: each problem names the file, the job or chain, and the
//! field; validation collects them all before it refuses.

use std::fmt;

/// One problem in a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    /// The catalog file the problem is in, as it was given.
    pub file: String,
    /// The job at fault; None for a problem with the file, `[settings]` or a chain.
    pub job: Option<String>,
    /// The chain at fault (`[chains.<name>]`), when it is one.
    pub chain: Option<String>,
    /// The field at fault, dotted (`schedule.timezone`); None when no single field is.
    pub field: Option<String>,
    /// What is wrong, and usually what is allowed.
    pub message: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.file)?;
        if let Some(job) = &self.job {
            write!(f, "job `{job}`: ")?;
        }
        if let Some(chain) = &self.chain {
            write!(f, "chain `{chain}`: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem found in a catalog (validation does not stop at the first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CatalogErrors(pub Vec<CatalogError>);

impl fmt::Display for CatalogErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}
