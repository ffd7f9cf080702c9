//! Who may read and who may write a dataset: lists of grants, and the one
//! check every route asks.

use super::{Caller, Principal};

/// What a request wants to do with a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    /// Metadata, data, pictures, every protocol's reads.
    Read,
    /// Writes (milestone 4's write routes).
    Write,
}

/// One entry of a dataset's `read` or `write` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// `*`: anyone, anonymous included.
    Anyone,
    /// `authenticated`: anyone with valid credentials.
    Authenticated,
    /// `sub:ID`: the token's subject.
    Subject(String),
    /// `group:NAME`: a member of the group (the groups claim).
    Group(String),
    /// `scope:NAME`: a token with the scope (`scope` or `scp`).
    Scope(String),
    /// `key:NAME`: the API key `[auth.api_keys.NAME]`.
    Key(String),
}

impl std::str::FromStr for Grant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let named = |kind: &str, name: &str| {
            if name.is_empty() {
                Err(format!("grant '{text}' names no {kind}"))
            } else {
                Ok(name.to_string())
            }
        };
        match text.split_once(':') {
            _ if text == "*" => Ok(Self::Anyone),
            _ if text == "authenticated" => Ok(Self::Authenticated),
            Some(("sub", id)) => named("subject", id).map(Self::Subject),
            Some(("group", name)) => named("group", name).map(Self::Group),
            Some(("scope", name)) => named("scope", name).map(Self::Scope),
            Some(("key", name)) => named("key", name).map(Self::Key),
            _ => Err(format!(
                "unknown grant '{text}': expected \"*\", \"authenticated\", \"sub:ID\", \"group:NAME\", \"scope:NAME\" or \"key:NAME\""
            )),
        }
    }
}

impl Grant {
    fn held_by(&self, principal: &Principal) -> bool {
        match self {
            Self::Anyone => true,
            // A valid token or API key; a dataset's token is a read key of
            // that dataset only, not an identity.
            Self::Authenticated => principal.subject.is_some() || principal.key.is_some(),
            Self::Subject(id) => principal.subject.as_deref() == Some(id),
            Self::Group(name) => principal.groups.iter().any(|g| g == name),
            Self::Scope(name) => principal.scopes.iter().any(|s| s == name),
            Self::Key(name) => principal.key.as_deref() == Some(name),
        }
    }
}

/// Why a request may not do what it asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No credentials, and the grant needs some (401).
    NoCredentials,
    /// A token that failed verification, and why (401 `invalid_token`).
    InvalidToken(&'static str),
    /// Credentials without the grant (403).
    Forbidden,
    /// A token whose issuer's keys cannot be fetched (503).
    IssuerUnavailable,
}

/// A dataset's grants: who may read it and who may write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    /// The dataset's name (its legacy `token` holds `read` on it).
    dataset: String,
    read: Vec<Grant>,
    write: Vec<Grant>,
    /// Whether the dataset has a legacy `token` (a wrong credential is then
    /// 403, as it always was).
    has_token: bool,
}

impl Grants {
    /// The grants of dataset `name`: `read` defaults to anyone unless the
    /// dataset has a legacy `token` (which then is its only reader);
    /// `write` defaults to nobody.
    pub fn new(name: &str, read: Option<Vec<Grant>>, write: Option<Vec<Grant>>, has_token: bool) -> Self {
        let read = read.unwrap_or_else(|| if has_token { Vec::new() } else { vec![Grant::Anyone] });
        Self {
            dataset: name.to_string(),
            read,
            write: write.unwrap_or_default(),
            has_token,
        }
    }

    /// Whether `caller` holds `permission`; credentials are looked at only
    /// when the grant is not open to anyone, so a stale token does not
    /// stop a public read.
    pub fn check(&self, caller: &Caller, permission: Permission) -> Result<(), Denied> {
        let list = match permission {
            Permission::Read => &self.read,
            Permission::Write => &self.write,
        };
        if list.contains(&Grant::Anyone) {
            return Ok(());
        }
        match caller {
            Caller::Anonymous => Err(Denied::NoCredentials),
            Caller::Invalid(why) => Err(Denied::InvalidToken(why)),
            Caller::IssuerUnavailable => Err(Denied::IssuerUnavailable),
            Caller::Unknown if self.has_token => Err(Denied::Forbidden),
            Caller::Unknown => Err(Denied::InvalidToken(
                "the credential is no API key or token this service knows",
            )),
            Caller::Known(principal) => {
                let by_token = permission == Permission::Read && principal.tokens_of.contains(&self.dataset);
                if by_token || list.iter().any(|g| g.held_by(principal)) {
                    Ok(())
                } else {
                    Err(Denied::Forbidden)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn grants(read: &[&str], write: &[&str]) -> Grants {
        let parse = |l: &[&str]| Some(l.iter().map(|g| g.parse().unwrap()).collect());
        Grants::new("ds", parse(read), parse(write), false)
    }

    fn person(sub: &str, groups: &[&str], scopes: &[&str]) -> Caller {
        Caller::Known(Arc::new(Principal {
            subject: Some(sub.into()),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            scopes: scopes.iter().map(|g| g.to_string()).collect(),
            ..Principal::default()
        }))
    }

    #[test]
    fn grants_parse_and_refuse_unknown_forms() {
        assert_eq!("*".parse(), Ok(Grant::Anyone));
        assert_eq!("group:a:b".parse(), Ok(Grant::Group("a:b".into())));
        for bad in ["", "everyone", "sub:", "role:x", "Group:x"] {
            assert!(bad.parse::<Grant>().is_err(), "{bad}");
        }
    }

    #[test]
    fn each_grant_kind_admits_its_holder_only() {
        let g = grants(
            &["sub:alice", "group:ocean", "scope:zarr.read", "key:pipeline"],
            &["group:writers"],
        );
        let read = Permission::Read;
        assert_eq!(g.check(&person("alice", &[], &[]), read), Ok(()));
        assert_eq!(g.check(&person("bob", &["ocean"], &[]), read), Ok(()));
        assert_eq!(g.check(&person("bob", &[], &["zarr.read"]), read), Ok(()));
        assert_eq!(
            g.check(&person("bob", &["land"], &["other"]), read),
            Err(Denied::Forbidden)
        );
        let key = Caller::Known(Arc::new(Principal {
            key: Some("pipeline".into()),
            ..Principal::default()
        }));
        assert_eq!(g.check(&key, read), Ok(()));
        assert_eq!(g.check(&key, Permission::Write), Err(Denied::Forbidden));
        assert_eq!(g.check(&person("x", &["writers"], &[]), Permission::Write), Ok(()));
        assert_eq!(g.check(&Caller::Anonymous, read), Err(Denied::NoCredentials));
        assert!(matches!(g.check(&Caller::Unknown, read), Err(Denied::InvalidToken(_))));
        assert_eq!(
            g.check(&Caller::Invalid("expired"), read),
            Err(Denied::InvalidToken("expired"))
        );
        assert_eq!(
            g.check(&Caller::IssuerUnavailable, read),
            Err(Denied::IssuerUnavailable)
        );
    }

    #[test]
    fn defaults_open_reads_close_writes_and_a_token_is_a_read_key() {
        let open = Grants::new("ds", None, None, false);
        assert_eq!(open.check(&Caller::Anonymous, Permission::Read), Ok(()));
        assert_eq!(open.check(&Caller::Invalid("expired"), Permission::Read), Ok(()));
        assert_eq!(
            open.check(&Caller::Anonymous, Permission::Write),
            Err(Denied::NoCredentials)
        );
        let tokened = Grants::new("ds", None, None, true);
        assert_eq!(
            tokened.check(&Caller::Anonymous, Permission::Read),
            Err(Denied::NoCredentials)
        );
        let holder = Caller::Known(Arc::new(Principal {
            tokens_of: vec!["ds".into()],
            ..Principal::default()
        }));
        assert_eq!(tokened.check(&holder, Permission::Read), Ok(()));
        assert_eq!(tokened.check(&holder, Permission::Write), Err(Denied::Forbidden));
        let other = Grants::new("other", None, None, true);
        assert_eq!(other.check(&holder, Permission::Read), Err(Denied::Forbidden));
        assert_eq!(
            tokened.check(&Caller::Unknown, Permission::Read),
            Err(Denied::Forbidden)
        );
        // A dataset's token is no identity: it holds no `authenticated`.
        let everyone_known = Some(vec![Grant::Authenticated]);
        let authenticated = Grants::new("elsewhere", everyone_known.clone(), everyone_known, false);
        assert_eq!(authenticated.check(&holder, Permission::Read), Err(Denied::Forbidden));
        assert_eq!(authenticated.check(&holder, Permission::Write), Err(Denied::Forbidden));
        assert_eq!(authenticated.check(&person("x", &[], &[]), Permission::Write), Ok(()));
        assert_eq!(
            authenticated.check(&Caller::Anonymous, Permission::Read),
            Err(Denied::NoCredentials)
        );
    }
}
