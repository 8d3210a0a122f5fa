//! Tag scopes for internal (ghost/agent) memories.
//!
//! A user's collection may hold ghost memories from many ghost conversations;
//! the tags below tell them apart. Isolation depends on these tags being
//! complete, so every incomplete or unknown combination is an error, never an
//! empty (match-everything) scope.
//!
//! | context                | internal tags                                        |
//! |------------------------|------------------------------------------------------|
//! | agent                  | `agent`                                              |
//! | user ghost of alice    | `ghost`, `ghost_type:user`, `ghost_owner:user:alice` |
//! | space ghost `s`        | `ghost`, `ghost_type:space`, `ghost_owner:space:s`   |
//! | group ghost `g`        | `ghost`, `ghost_type:group`, `ghost_owner:group:g`   |

use crate::error::{Error, Result};

pub const GHOST: &str = "ghost";
pub const AGENT: &str = "agent";
const GHOST_TYPE_PREFIX: &str = "ghost_type:";
const GHOST_OWNER_PREFIX: &str = "ghost_owner:";
/// Longest accepted ghost owner/space/group id, in bytes.
pub const MAX_SCOPE_ID_BYTES: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InternalType {
    Ghost,
    Agent,
}

impl InternalType {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "ghost" => Ok(InternalType::Ghost),
            "agent" => Ok(InternalType::Agent),
            other => Err(Error::invalid(
                format!("unknown internal_type '{}'", crate::error::echo(other)),
                "use 'ghost' or 'agent', or NULL for a normal memory",
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            InternalType::Ghost => GHOST,
            InternalType::Agent => AGENT,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GhostType {
    User,
    Space,
    Group,
}

impl GhostType {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "user" => Ok(GhostType::User),
            "space" => Ok(GhostType::Space),
            "group" => Ok(GhostType::Group),
            other => Err(Error::invalid(
                format!("unknown ghost_type '{}'", crate::error::echo(other)),
                "use 'user' (with ghost_owner), 'space' (with ghost_space) or 'group' (with ghost_group)",
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GhostType::User => "user",
            GhostType::Space => "space",
            GhostType::Group => "group",
        }
    }

    fn id_argument(self) -> &'static str {
        match self {
            GhostType::User => "ghost_owner",
            GhostType::Space => "ghost_space",
            GhostType::Group => "ghost_group",
        }
    }
}

/// The arguments of `engram.internal_tags` / the `X-Ghost-*` headers.
#[derive(Debug, Clone, Default)]
pub struct ScopeArgs<'a> {
    pub internal_type: Option<&'a str>,
    pub ghost_type: Option<&'a str>,
    pub ghost_owner: Option<&'a str>,
    pub ghost_space: Option<&'a str>,
    pub ghost_group: Option<&'a str>,
}

fn present(v: Option<&str>) -> Option<&str> {
    v.filter(|s| !s.is_empty())
}

fn check_id(argument: &str, id: &str) -> Result<()> {
    if id.trim().is_empty() {
        return Err(Error::invalid(
            format!("{argument} is blank"),
            format!("pass a non-empty {argument}"),
        ));
    }
    if id.len() > MAX_SCOPE_ID_BYTES {
        return Err(Error::new(
            crate::Sqlstate::ProgramLimitExceeded,
            format!(
                "{argument} is {} bytes long; the limit is {MAX_SCOPE_ID_BYTES}",
                id.len()
            ),
            format!("use a shorter {argument}"),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid(
            format!("{argument} contains control characters"),
            format!("pass {argument} as printable text"),
        ));
    }
    Ok(())
}

/// The full internal tag set for a context (see the module table).
pub fn internal_tags(args: &ScopeArgs<'_>) -> Result<Vec<String>> {
    let Some(internal_type) = present(args.internal_type) else {
        return Err(Error::new(
            crate::Sqlstate::NullValueNotAllowed,
            "internal_type is required",
            "pass internal_type => 'ghost' or 'agent' (header X-Internal-Type)",
        ));
    };
    let ghost_args = [
        ("ghost_type", present(args.ghost_type)),
        ("ghost_owner", present(args.ghost_owner)),
        ("ghost_space", present(args.ghost_space)),
        ("ghost_group", present(args.ghost_group)),
    ];
    match InternalType::parse(internal_type)? {
        InternalType::Agent => {
            if let Some((name, _)) = ghost_args.iter().find(|(_, v)| v.is_some()) {
                return Err(Error::invalid(
                    format!("{name} was given for an agent memory"),
                    "ghost_* arguments (X-Ghost-* headers) belong to internal_type 'ghost' only",
                ));
            }
            Ok(vec![AGENT.to_string()])
        }
        InternalType::Ghost => {
            let Some(ghost_type) = present(args.ghost_type) else {
                return Err(Error::new(
                    crate::Sqlstate::NullValueNotAllowed,
                    "ghost_type is required for a ghost memory",
                    "pass ghost_type => 'user', 'space' or 'group' (header X-Ghost-Type)",
                ));
            };
            let ghost_type = GhostType::parse(ghost_type)?;
            let wanted = ghost_type.id_argument();
            for (name, value) in &ghost_args[1..] {
                if *name != wanted && value.is_some() {
                    return Err(Error::invalid(
                        format!("{name} was given for a {} ghost", ghost_type.as_str()),
                        format!("a {} ghost takes {wanted} only", ghost_type.as_str()),
                    ));
                }
            }
            let id = ghost_args
                .iter()
                .find(|(name, _)| *name == wanted)
                .and_then(|(_, v)| *v)
                .ok_or_else(|| {
                    Error::new(
                        crate::Sqlstate::NullValueNotAllowed,
                        format!("{wanted} is required for a {} ghost", ghost_type.as_str()),
                        format!("pass {wanted} (header X-{})", header_name(wanted)),
                    )
                })?;
            check_id(wanted, id)?;
            Ok(vec![
                GHOST.to_string(),
                format!("{GHOST_TYPE_PREFIX}{}", ghost_type.as_str()),
                format!("{GHOST_OWNER_PREFIX}{}:{id}", ghost_type.as_str()),
            ])
        }
    }
}

fn header_name(argument: &str) -> &'static str {
    match argument {
        "ghost_owner" => "Ghost-Owner",
        "ghost_space" => "Ghost-Space",
        _ => "Ghost-Group",
    }
}

/// `internal_tags` minus the `ghost`/`agent` markers: what a read must AND in.
pub fn scope_tags(args: &ScopeArgs<'_>) -> Result<Vec<String>> {
    Ok(internal_tags(args)?
        .into_iter()
        .filter(|t| t != GHOST && t != AGENT)
        .collect())
}

fn is_scope_tag(tag: &str) -> bool {
    tag.starts_with(GHOST_TYPE_PREFIX) || tag.starts_with(GHOST_OWNER_PREFIX)
}

/// The scope tags carried by a memory's tag set, sorted (a canonical key).
pub fn scope_of(tags: &[&str]) -> Vec<String> {
    let mut scope: Vec<String> = tags.iter().filter(|t| is_scope_tag(t)).map(|t| t.to_string()).collect();
    scope.sort();
    scope.dedup();
    scope
}

/// Checks that a memory's tags carry exactly one complete scope for its
/// internal type, so that a write can never land in two scopes at once or in
/// none (which every reader of that type would see).
pub fn check_memory_scope(internal_type: Option<&str>, tags: &[&str]) -> Result<()> {
    let scope = scope_of(tags);
    let has = |t: &str| tags.contains(&t);
    match internal_type.map(InternalType::parse).transpose()? {
        None => {
            if has(GHOST) || !scope.is_empty() {
                return Err(Error::invalid(
                    "ghost scope tags on a normal memory",
                    "set internal_type => 'ghost' to write a ghost memory, or drop the ghost/ghost_type:/ghost_owner: tags",
                ));
            }
            if has(AGENT) {
                return Err(Error::invalid(
                    "the tag 'agent' is reserved for agent memories",
                    "set internal_type => 'agent' to write an agent memory (X-Internal-Type: agent), or use another tag",
                ));
            }
        }
        Some(InternalType::Agent) => {
            if !has(AGENT) || has(GHOST) || !scope.is_empty() {
                return Err(Error::invalid(
                    "an agent memory must carry the tag 'agent' and no ghost tags",
                    "add engram.internal_tags('agent') to tags",
                ));
            }
        }
        Some(InternalType::Ghost) => {
            let types: Vec<&String> = scope.iter().filter(|t| t.starts_with(GHOST_TYPE_PREFIX)).collect();
            let owners: Vec<&String> = scope.iter().filter(|t| t.starts_with(GHOST_OWNER_PREFIX)).collect();
            let consistent = match (types.as_slice(), owners.as_slice()) {
                ([t], [o]) => {
                    let ty = &t[GHOST_TYPE_PREFIX.len()..];
                    o[GHOST_OWNER_PREFIX.len()..]
                        .strip_prefix(ty)
                        .and_then(|rest| rest.strip_prefix(':'))
                        .is_some_and(|id| !id.is_empty())
                }
                _ => false,
            };
            if !has(GHOST) || has(AGENT) || !consistent {
                return Err(Error::invalid(
                    "a ghost memory must carry exactly one complete ghost scope",
                    "add engram.internal_tags('ghost', ghost_type => ..., ghost_owner/ghost_space/ghost_group => ...) to tags",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args<'a>(it: &'a str, gt: Option<&'a str>, owner: Option<&'a str>) -> ScopeArgs<'a> {
        ScopeArgs {
            internal_type: Some(it),
            ghost_type: gt,
            ghost_owner: owner,
            ..Default::default()
        }
    }

    #[test]
    fn agent_tags() {
        assert_eq!(internal_tags(&args("agent", None, None)).unwrap(), vec!["agent"]);
        assert!(scope_tags(&args("agent", None, None)).unwrap().is_empty());
    }

    #[test]
    fn user_ghost_tags_match_the_seed_table() {
        let t = internal_tags(&args("ghost", Some("user"), Some("alice"))).unwrap();
        assert_eq!(t, vec!["ghost", "ghost_type:user", "ghost_owner:user:alice"]);
        let s = scope_tags(&args("ghost", Some("user"), Some("alice"))).unwrap();
        assert_eq!(s, vec!["ghost_type:user", "ghost_owner:user:alice"]);
    }

    #[test]
    fn space_and_group_ghosts() {
        let space = ScopeArgs {
            internal_type: Some("ghost"),
            ghost_type: Some("space"),
            ghost_space: Some("music-lovers"),
            ..Default::default()
        };
        assert_eq!(
            internal_tags(&space).unwrap(),
            vec!["ghost", "ghost_type:space", "ghost_owner:space:music-lovers"]
        );
        let group = ScopeArgs {
            internal_type: Some("ghost"),
            ghost_type: Some("group"),
            ghost_group: Some("band-mates"),
            ..Default::default()
        };
        assert_eq!(
            internal_tags(&group).unwrap(),
            vec!["ghost", "ghost_type:group", "ghost_owner:group:band-mates"]
        );
    }

    #[test]
    fn incomplete_or_unknown_combinations_are_errors() {
        assert!(internal_tags(&ScopeArgs::default()).is_err());
        assert!(internal_tags(&args("ghost", None, Some("alice"))).is_err());
        assert!(internal_tags(&args("ghost", Some("user"), None)).is_err());
        assert!(internal_tags(&args("ghost", Some("user"), Some("  "))).is_err());
        assert!(internal_tags(&args("ghost", Some("robot"), Some("alice"))).is_err());
        assert!(internal_tags(&args("agent", Some("user"), None)).is_err());
        assert!(internal_tags(&args("spirit", None, None)).is_err());
        let mixed = ScopeArgs {
            internal_type: Some("ghost"),
            ghost_type: Some("space"),
            ghost_owner: Some("alice"),
            ghost_space: Some("s"),
            ..Default::default()
        };
        assert!(internal_tags(&mixed).is_err());
    }

    #[test]
    fn memory_scope_checks() {
        let ghost = ["ghost", "ghost_type:user", "ghost_owner:user:alice", "food"];
        assert!(check_memory_scope(Some("ghost"), &ghost).is_ok());
        // two scopes at once would leak into both
        let planted = [
            "ghost",
            "ghost_type:user",
            "ghost_owner:user:alice",
            "ghost_owner:user:carol",
        ];
        assert!(check_memory_scope(Some("ghost"), &planted).is_err());
        // type and owner disagree
        let mismatch = ["ghost", "ghost_type:space", "ghost_owner:user:alice"];
        assert!(check_memory_scope(Some("ghost"), &mismatch).is_err());
        assert!(check_memory_scope(Some("ghost"), &["ghost"]).is_err());
        assert!(check_memory_scope(Some("agent"), &["agent", "x"]).is_ok());
        assert!(check_memory_scope(Some("agent"), &["x"]).is_err());
        assert!(check_memory_scope(None, &["agent", "travel"]).is_err());
        assert!(check_memory_scope(None, &["agents", "travel"]).is_ok());
        assert!(check_memory_scope(None, &["ghost_owner:user:carol"]).is_err());
    }

    #[test]
    fn scope_of_is_canonical() {
        assert_eq!(
            scope_of(&["b", "ghost_owner:user:a", "ghost", "ghost_type:user"]),
            vec!["ghost_owner:user:a", "ghost_type:user"]
        );
    }
}
