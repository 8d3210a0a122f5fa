//! Trust, staleness and ranking formulas. All are pure functions of their
//! arguments so that SQL can mark them IMMUTABLE; tunables arrive as
//! arguments, filled from GUCs by callers.

/// Days over which trust halves (`engram.trust_half_life_days`).
pub const DEFAULT_TRUST_HALF_LIFE_DAYS: f64 = 180.0;
/// Days without access after which a memory counts as fully stale
/// (`engram.stale_after_days`).
pub const DEFAULT_STALE_AFTER_DAYS: f64 = 90.0;
/// Weight of staleness in the rank score (`engram.staleness_weight`).
pub const DEFAULT_STALENESS_WEIGHT: f64 = 0.3;

/// Who wrote a memory. Humans are trusted most; agents least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthorType {
    Human,
    System,
    Agent,
}

impl AuthorType {
    pub const ALL: [&'static str; 3] = ["human", "agent", "system"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "human" => Some(AuthorType::Human),
            "system" => Some(AuthorType::System),
            "agent" => Some(AuthorType::Agent),
            _ => None,
        }
    }

    /// Base trust before decay and penalties.
    pub fn weight(self) -> f64 {
        match self {
            AuthorType::Human => 1.0,
            AuthorType::System => 0.9,
            AuthorType::Agent => 0.7,
        }
    }
}

/// `weight(author) × 2^(−age/half_life) × (1 − min(0.05 × corrections, 0.3))
/// × (0.5 if flagged)`, in [0, 1].
///
/// Negative ages (clock skew) count as zero so a memory never gains trust
/// above its author weight; a non-positive half-life disables decay.
pub fn trust_score(author: AuthorType, age_days: f64, corrections: i32, flagged: bool, half_life_days: f64) -> f64 {
    let age = if age_days.is_finite() { age_days.max(0.0) } else { 0.0 };
    let decay = if half_life_days > 0.0 {
        (-age / half_life_days).exp2()
    } else {
        1.0
    };
    let correction_penalty = 1.0 - (0.05 * f64::from(corrections.max(0))).min(0.3);
    let flag_factor = if flagged { 0.5 } else { 1.0 };
    (author.weight() * decay * correction_penalty * flag_factor).clamp(0.0, 1.0)
}

/// `min(1, min(days/stale_after, 1) + 0.3 if flagged + min(0.1 × corrections, 0.3))`,
/// in [0, 1].
pub fn staleness_score(days_since_access: f64, corrections: i32, flagged: bool, stale_after_days: f64) -> f64 {
    let days = if days_since_access.is_finite() {
        days_since_access.max(0.0)
    } else {
        0.0
    };
    let access = if stale_after_days > 0.0 {
        (days / stale_after_days).min(1.0)
    } else {
        0.0
    };
    let flag = if flagged { 0.3 } else { 0.0 };
    let corrections = (0.1 * f64::from(corrections.max(0))).min(0.3);
    (access + flag + corrections).min(1.0)
}

/// `relevance × trust × (1 − weight × staleness)`. Relevance below zero (an
/// anti-correlated vector) counts as zero so it can never outrank a match.
pub fn rank_score(relevance: f64, trust: f64, staleness: f64, staleness_weight: f64) -> f64 {
    let relevance = if relevance.is_finite() { relevance.max(0.0) } else { 0.0 };
    let trust = trust.clamp(0.0, 1.0);
    let staleness = staleness.clamp(0.0, 1.0);
    let weight = staleness_weight.clamp(0.0, 1.0);
    relevance * trust * (1.0 - weight * staleness)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn trust_author_weights_at_age_zero() {
        assert!(close(trust_score(AuthorType::Human, 0.0, 0, false, 180.0), 1.0));
        assert!(close(trust_score(AuthorType::System, 0.0, 0, false, 180.0), 0.9));
        assert!(close(trust_score(AuthorType::Agent, 0.0, 0, false, 180.0), 0.7));
    }

    #[test]
    fn trust_halves_every_half_life() {
        assert!(close(trust_score(AuthorType::Human, 180.0, 0, false, 180.0), 0.5));
        assert!(close(trust_score(AuthorType::Human, 360.0, 0, false, 180.0), 0.25));
    }

    #[test]
    fn trust_correction_penalty_caps_at_thirty_percent() {
        assert!(close(trust_score(AuthorType::Human, 0.0, 2, false, 180.0), 0.9));
        assert!(close(trust_score(AuthorType::Human, 0.0, 6, false, 180.0), 0.7));
        assert!(close(trust_score(AuthorType::Human, 0.0, 60, false, 180.0), 0.7));
    }

    #[test]
    fn trust_flag_halves() {
        assert!(close(trust_score(AuthorType::Agent, 0.0, 0, true, 180.0), 0.35));
    }

    #[test]
    fn trust_ignores_negative_age_and_bad_half_life() {
        assert!(close(trust_score(AuthorType::Human, -5.0, 0, false, 180.0), 1.0));
        assert!(close(trust_score(AuthorType::Human, 1000.0, 0, false, 0.0), 1.0));
        assert!(close(trust_score(AuthorType::Human, f64::NAN, 0, false, 180.0), 1.0));
    }

    #[test]
    fn staleness_components() {
        assert!(close(staleness_score(0.0, 0, false, 90.0), 0.0));
        assert!(close(staleness_score(45.0, 0, false, 90.0), 0.5));
        assert!(close(staleness_score(900.0, 0, false, 90.0), 1.0));
        assert!(close(staleness_score(0.0, 0, true, 90.0), 0.3));
        assert!(close(staleness_score(0.0, 2, false, 90.0), 0.2));
        assert!(close(staleness_score(0.0, 9, false, 90.0), 0.3));
        assert!(close(staleness_score(45.0, 9, true, 90.0), 1.0));
    }

    #[test]
    fn rank_score_formula() {
        assert!(close(rank_score(0.8, 1.0, 0.0, 0.3), 0.8));
        assert!(close(rank_score(0.8, 0.5, 1.0, 0.3), 0.8 * 0.5 * 0.7));
        assert!(close(rank_score(-0.4, 1.0, 0.0, 0.3), 0.0));
    }

    #[test]
    fn flagged_stale_memory_ranks_below_fresh_trusted_one() {
        let fresh = rank_score(0.80, trust_score(AuthorType::Agent, 1.0, 0, false, 180.0), 0.0, 0.3);
        let flagged = rank_score(
            0.85,
            trust_score(AuthorType::Agent, 1.0, 0, true, 180.0),
            staleness_score(1.0, 0, true, 90.0),
            0.3,
        );
        assert!(fresh > flagged);
    }
}
