//! The one place that decides what a caller may see and change.
//!
//! Every authenticated request has a [`Caller`]: the client (or orders API key) and
//! its namespace, from the token's `ns` claim (or the key's record), never from the
//! request. A tenant acts in its own namespace only; an operator (scope `admin`) may
//! act in any and names which where it matters (`namespaceId` in a create body or
//! the reports' query), defaulting to its own.
//!
//! - Something of another namespace is answered exactly as if it did not exist
//!   ([`Caller::own`]: the handler's own 404), so ids of other tenants cannot be
//!   probed by reading, approving or updating them.
//! - Naming another namespace in a request is refused (403, [`Caller::acting_in`]).
//! - Ids are global where the spec makes them part of public URLs or realised ad ids
//!   (campaign and segment ids): creating one whose id another namespace holds is a
//!   409 like any taken id. Choose ids with a tenant prefix, or leave them out to
//!   get a generated one.

use rm_schemas::namespace::{self, Viewer};

use crate::error::ApiError;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The OAuth client id (or the orders key's id).
    pub client_id: String,
    /// The caller's namespace.
    pub namespace: String,
    /// Whether the caller is an operator (scope `admin`).
    pub admin: bool,
}

impl From<rm_auth::Principal> for Caller {
    fn from(p: rm_auth::Principal) -> Self {
        Caller {
            client_id: p.client_id,
            namespace: p.namespace,
            admin: p.admin,
        }
    }
}

impl Caller {
    /// Whether the caller may see something of namespace `ns`.
    pub fn sees(&self, ns: &str) -> bool {
        self.admin || self.namespace == ns
    }

    /// `Ok` when the caller may see something of namespace `ns`, else `hidden`: the
    /// error the caller gets for something that does not exist.
    pub fn own(&self, ns: &str, hidden: impl FnOnce() -> ApiError) -> Result<(), ApiError> {
        if self.sees(ns) {
            Ok(())
        } else {
            Err(hidden())
        }
    }

    /// The namespace a request acts in: `requested` (a body's or query's
    /// `namespaceId`, `field` naming it) when an operator gives one, the caller's
    /// own otherwise. A tenant naming another namespace gets 403.
    pub fn acting_in(&self, requested: Option<&str>, field: &str) -> Result<String, ApiError> {
        match requested.filter(|r| !r.is_empty()) {
            None => Ok(self.namespace.clone()),
            Some(r) if r == self.namespace => Ok(r.to_owned()),
            Some(r) if !namespace::valid(r) => Err(ApiError::invalid(
                field,
                "not a namespace id ([a-z0-9_-], 1 to 64)",
            )),
            Some(r) if self.admin => Ok(r.to_owned()),
            Some(_) => Err(ApiError::PermissionDenied(format!(
                "{field} names another namespace than the token's ({}); a client acts in its own namespace only",
                self.namespace
            ))),
        }
    }

    /// The inspector's view of the caller.
    pub fn viewer(&self) -> Viewer {
        if self.admin {
            Viewer::Operator
        } else {
            Viewer::Tenant(self.namespace.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(ns: &str) -> Caller {
        Caller {
            client_id: "c".into(),
            namespace: ns.into(),
            admin: false,
        }
    }

    #[test]
    fn tenants_act_in_their_namespace_and_operators_anywhere() {
        let acme = tenant("acme");
        assert_eq!(acme.acting_in(None, "f").unwrap(), "acme");
        assert_eq!(acme.acting_in(Some(""), "f").unwrap(), "acme");
        assert_eq!(acme.acting_in(Some("acme"), "f").unwrap(), "acme");
        assert!(matches!(
            acme.acting_in(Some("brand"), "f"),
            Err(ApiError::PermissionDenied(_))
        ));
        let op = Caller {
            admin: true,
            ..tenant("ops")
        };
        assert_eq!(op.acting_in(Some("brand"), "f").unwrap(), "brand");
        assert_eq!(op.acting_in(None, "f").unwrap(), "ops");
        assert!(matches!(
            op.acting_in(Some("Not Valid"), "f"),
            Err(ApiError::InvalidArgument { .. })
        ));
        assert!(acme.own("acme", || ApiError::NotFound("x".into())).is_ok());
        assert!(matches!(
            acme.own("brand", || ApiError::NotFound("x".into())),
            Err(ApiError::NotFound(_))
        ));
        assert!(op.own("brand", || ApiError::NotFound("x".into())).is_ok());
        assert_eq!(acme.viewer(), Viewer::Tenant("acme".into()));
        assert_eq!(op.viewer(), Viewer::Operator);
    }
}
