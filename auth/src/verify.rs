//! The one verifier of access tokens, used by the api (its own keys) and the edge
//! (the api's JWK set, fetched by the edge).
//!
//! The claims rule, the same on both ports:
//!
//! - the `Authorization` value is `Bearer <token>` (scheme case-insensitive);
//!   nothing sent is [`AuthError::NoCredentials`], anything else wrong
//!   [`AuthError::InvalidToken`];
//! - the header's `alg` is `EdDSA` (so `alg: none` and HMAC tokens, even one signed
//!   with our public key as the secret, are refused) and it names a `kid` of the
//!   key set;
//! - the signature verifies; `iss` and `aud` are the configured ones; `exp` and
//!   `nbf` hold with 30 s of leeway; every claim of [`Claims`] is present (`sub`,
//!   `iat`, `scope`, `ns`, ...), and `ns` is a valid namespace id;
//! - the token was issued after its client was removed, if it was
//!   ([`KeySet::revoked_at`]);
//! - for an operation, the token holds one of the accepted scopes or `admin`
//!   ([`AuthError::InsufficientScope`] otherwise, a 403).

pub use jsonwebtoken::DecodingKey;
use jsonwebtoken::{Algorithm, Validation};

use crate::client::Scope;
use crate::error::AuthError;
use serde::{Deserialize, Serialize};

/// Token claims.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer.
    pub iss: String,
    /// Subject: the client id.
    pub sub: String,
    /// Audience.
    pub aud: String,
    /// Issued at (Unix seconds).
    pub iat: i64,
    /// Not before (Unix seconds).
    pub nbf: i64,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Unique token id.
    pub jti: String,
    /// Scopes, space-separated.
    pub scope: String,
    /// The client id (as RFC 9068 names it).
    pub client_id: String,
    /// The client's namespace.
    pub ns: String,
}

impl Claims {
    /// The scopes the token carries (unknown names are dropped).
    pub fn scopes(&self) -> Vec<Scope> {
        self.scope.split(' ').filter_map(Scope::parse).collect()
    }
}

/// Clock leeway for `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 30;

/// Where the verifier finds keys and removed clients.
pub trait KeySet {
    /// The public key of `kid`, if the set holds it.
    fn key(&self, kid: &str) -> Option<&DecodingKey>;
    /// When the client `client_id` was removed (Unix seconds), if it was.
    fn revoked_at(&self, client_id: &str) -> Option<i64>;
}

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The client id (`sub`).
    pub client_id: String,
    /// The client's namespace (`ns`).
    pub namespace: String,
    /// Whether the token holds `admin`: an operator.
    pub admin: bool,
}

/// Verifies tokens of one issuer for one audience; see the module header.
#[derive(Debug, Clone)]
pub struct Verifier {
    issuer: String,
    audience: String,
}

fn invalid(m: &str) -> AuthError {
    AuthError::InvalidToken(m.to_owned())
}

/// The token of an `Authorization: Bearer <token>` value.
pub fn bearer_token(authorization: Option<&http::HeaderValue>) -> Result<&str, AuthError> {
    let value = authorization
        .ok_or_else(|| AuthError::NoCredentials("missing Authorization: Bearer token".into()))?
        .to_str()
        .map_err(|_| invalid("malformed Authorization header"))?;
    value
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| invalid("Authorization must be 'Bearer <token>'"))
}

/// The `kid` of a token whose header passes the rule (`alg: EdDSA`, a `kid`), so a
/// verifier that fetches keys knows which one to look for.
pub fn key_id(token: &str) -> Result<String, AuthError> {
    let header = jsonwebtoken::decode_header(token)
        .map_err(|_| invalid("the token is not a well-formed JWT with a supported alg"))?;
    if header.alg != Algorithm::EdDSA {
        return Err(invalid("the token's alg is not EdDSA"));
    }
    header.kid.ok_or_else(|| invalid("the token has no kid"))
}

/// The public key of an Ed25519 JWK (`kty: OKP`, `crv: Ed25519`) from its `x`
/// (base64url), as a JWK set publishes it.
pub fn ed25519_key(x: &str) -> Option<DecodingKey> {
    DecodingKey::from_ed_components(x).ok()
}

impl Verifier {
    /// A verifier of tokens from `issuer` for `audience`.
    pub fn new(issuer: &str, audience: &str) -> Verifier {
        Verifier {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
        }
    }

    /// The token's claims when it passes the rule (header, signature, claims,
    /// revocation) against `keys`.
    pub fn verify(&self, token: &str, keys: &impl KeySet) -> Result<Claims, AuthError> {
        let kid = key_id(token)?;
        let key = keys
            .key(&kid)
            .ok_or_else(|| invalid("the token's kid is not one of ours"))?;
        let mut v = Validation::new(Algorithm::EdDSA);
        v.set_issuer(&[&self.issuer]);
        v.set_audience(&[&self.audience]);
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        v.leeway = LEEWAY_SECS;
        v.validate_nbf = true;
        let claims = jsonwebtoken::decode::<Claims>(token, key, &v)
            .map(|d| d.claims)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind as K;
                invalid(match e.kind() {
                    K::ExpiredSignature => "the token has expired",
                    K::ImmatureSignature => "the token is not valid yet",
                    K::InvalidIssuer => "the token is from another issuer",
                    K::InvalidAudience => "the token is for another audience",
                    K::InvalidSignature => "the token's signature does not verify",
                    K::MissingRequiredClaim(_) => "the token lacks a required claim",
                    _ => "the token is not valid",
                })
            })?;
        if !rm_schemas::namespace::valid(&claims.ns) {
            return Err(invalid("the token names no namespace; get a new one"));
        }
        if keys
            .revoked_at(&claims.sub)
            .is_some_and(|at| claims.iat <= at)
        {
            return Err(invalid("the token's client was removed"));
        }
        Ok(claims)
    }

    /// Verifies `token` ([`Verifier::verify`]) and checks that it holds one of
    /// `accepted` (or `admin`): who it speaks for.
    pub fn authorize(
        &self,
        token: &str,
        keys: &impl KeySet,
        accepted: &[Scope],
    ) -> Result<Principal, AuthError> {
        let claims = self.verify(token, keys)?;
        let held = claims.scopes();
        let admin = held.contains(&Scope::Admin);
        if admin || accepted.iter().any(|s| held.contains(s)) {
            Ok(Principal {
                client_id: claims.sub,
                namespace: claims.ns,
                admin,
            })
        } else {
            let need: Vec<&str> = accepted.iter().map(|s| s.as_str()).collect();
            Err(AuthError::InsufficientScope(format!(
                "the token lacks the scope this operation needs ({})",
                need.join(" or ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_values() {
        let v = |s: &str| http::HeaderValue::from_str(s).unwrap();
        assert!(matches!(
            bearer_token(None),
            Err(AuthError::NoCredentials(_))
        ));
        assert_eq!(bearer_token(Some(&v("bearer abc"))).unwrap(), "abc");
        assert!(matches!(
            bearer_token(Some(&v("Basic abc"))),
            Err(AuthError::InvalidToken(_))
        ));
        assert!(matches!(
            bearer_token(Some(&v("Bearer  "))),
            Err(AuthError::InvalidToken(_))
        ));
    }

    #[test]
    fn headers_without_eddsa_or_kid_are_refused() {
        // HS256, and EdDSA without a kid.
        let hs = "eyJhbGciOiJIUzI1NiJ9.eyJzY29wZSI6InJlcG9ydHMifQ.sig";
        assert_eq!(
            key_id(hs).unwrap_err().to_string(),
            "the token's alg is not EdDSA"
        );
        let no_kid = "eyJhbGciOiJFZERTQSJ9.e30.sig";
        assert_eq!(
            key_id(no_kid).unwrap_err().to_string(),
            "the token has no kid"
        );
        assert!(key_id("garbage").is_err());
    }
}
