//! SQL binding of the context package's rendering (engram-core's `context`):
//! `engram.context` gathers the parts in plpgsql and calls this once.

use crate::errors::OrRaise;
use engram_core::{context, Error, Sqlstate};
use pgrx::prelude::*;
use pgrx::JsonB;

/// The package with only what fits in `budget_chars`, plus its `text`.
#[pg_extern(immutable, parallel_safe, strict)]
fn _render_context(package: JsonB, budget_chars: i64) -> JsonB {
    let budget = context::check_budget(budget_chars).or_raise();
    JsonB(context::render(&package.0, budget))
}

/// Refuses a budget out of range (22023), before any data is read.
#[pg_extern(immutable, parallel_safe)]
fn _check_budget(budget_chars: Option<i64>) {
    let budget = budget_chars
        .ok_or_else(|| {
            Error::new(
                Sqlstate::NullValueNotAllowed,
                "budget_chars is NULL",
                format!(
                    "pass {} to {} characters, e.g. budget_chars => 4000",
                    context::MIN_BUDGET,
                    context::MAX_BUDGET
                ),
            )
        })
        .or_raise();
    context::check_budget(budget).or_raise();
}
